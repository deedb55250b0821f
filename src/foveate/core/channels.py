"""Channel groups: the registry of what a texture can hold, and the generators that fill it.

A :class:`ChannelGroup` names its channels, says how expensive it is, and has a generator that maps an
:class:`EncodeContext` to a level-0 tile map ``(gh, gw, len(channels))`` float32 in [0, 1] -- or ``None`` when
its source is not configured (no video, no semantic model, no caller map); such a group is then stored as
zeros and reported in ``Texture.absent``.  Adding a group is one function and one :func:`register_group` call.

The ``full`` preset is the 40-channel layout of DESIGN.md, in its order, with the text density beside the
text mask (41 channels)::

    0-2 rgb | 3-4 edges | 5-6 frequency | 7 motion | 8 saliency | 9-11 position | 12-14 clusters |
    15-17 temporal | 18-33 semantic | 34 distance | 35-37 attention | 38 boundaries | 39-40 text
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable

import numpy as np

from . import ops
from .config import EncodeConfig
from .errors import ConfigError, FoveateError


@dataclass(frozen=True)
class ChannelGroup:
    """A named block of texture channels.

    Attributes:
        name: registry key (``"edges"``).
        channels: channel names, in order (``("edges_dark", "edges_light")``).
        generator: ``fn(ctx) -> (gh, gw, C) float32 | None``; ``None`` means "no source configured".
        cost: rough encode cost on a 1024x1024 image: ``"free"``, ``"low"`` (< 5 ms), ``"medium"``
            (< 50 ms) or ``"high"`` (model inference).
        description: one line for ``foveate info`` and the docs.
        pixels, finish: for a group whose tiles are a function of the tile means of a pixel map,
            ``generator(ctx) == finish(ctx.tiles(pixels(ctx)), ctx.patch)``: ``pixels(ctx) -> (H, W, k)`` float32
            and ``finish(tile_means (..., k), patch) -> (..., len(channels))`` (``None``: the identity).  Video
            motion compensation keeps such maps at a finer resolution than the tiles and moves them with the
            camera.
        fallible: the generator runs a model that may fail on a valid image (OCR on a 10x10000 strip): an
            exception that is not a ``FoveateError`` leaves the group absent, with a note in
            ``Texture.extras["notes"]``, instead of failing the encode.
    """

    name: str
    channels: tuple[str, ...]
    generator: Callable[[EncodeContext], np.ndarray | None]
    cost: str
    description: str
    pixels: Callable[[EncodeContext], np.ndarray] | None = None
    finish: Callable[[np.ndarray, int], np.ndarray] | None = None
    fallible: bool = False


_REGISTRY: dict[str, ChannelGroup] = {}

#: Group order of the ``full`` preset (the DESIGN.md layout); other presets keep this relative order.
LAYOUT_ORDER: list[str] = ["rgb", "edges", "frequency", "motion", "saliency", "position", "clusters",
                           "temporal", "semantic", "distance", "attention", "boundaries", "text"]

PRESETS: dict[str, tuple[str, ...]] = {
    "fast": ("rgb", "edges", "frequency", "motion", "saliency", "position", "distance"),
    "default": ("rgb", "edges", "frequency", "motion", "saliency", "position", "clusters", "distance",
                "boundaries"),
    "full": tuple(LAYOUT_ORDER),
}


def register_group(group: ChannelGroup, presets: tuple[str, ...] = ()) -> ChannelGroup:
    """Add (or replace) a group in the registry and, optionally, to named presets (kept in layout order)."""
    _REGISTRY[group.name] = group
    if group.name not in LAYOUT_ORDER:
        LAYOUT_ORDER.append(group.name)
    for p in presets:
        if group.name not in PRESETS[p]:
            PRESETS[p] = tuple(g for g in LAYOUT_ORDER if g in PRESETS[p] or g == group.name)
    return group


def get_group(name: str) -> ChannelGroup:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ConfigError(f"unknown channel group {name!r}; known: {', '.join(list_groups())}") from None


def list_groups() -> list[str]:
    return [g for g in LAYOUT_ORDER if g in _REGISTRY]


def resolve_groups(config: EncodeConfig) -> tuple[str, ...]:
    """The groups a config asks for, in layout order."""
    if config.groups is not None:
        names = tuple(config.groups)
        if not names:
            raise ConfigError("groups is empty; name at least one channel group or use a preset")
    else:
        if config.preset not in PRESETS:
            raise ConfigError(f"unknown preset {config.preset!r}; choose one of {', '.join(PRESETS)}")
        names = PRESETS[config.preset]
    for n in names:
        get_group(n)
    if len(set(names)) != len(names):
        raise ConfigError(f"a channel group is named twice in {names}")
    order = {g: i for i, g in enumerate(LAYOUT_ORDER)}
    return tuple(sorted(names, key=order.__getitem__))


# ----------------------------------------------------------------------------------------------------------
# The context that generators share (intermediates computed once, on first use)


@dataclass
class EncodeContext:
    """Everything a generator may read.  Intermediates are computed lazily and shared between groups."""

    image: np.ndarray  # (H, W, 3) uint8
    config: EncodeConfig
    extras: dict[str, Any] = field(default_factory=dict)  # JSON-able results stored with the texture
    tensors: dict[str, np.ndarray] = field(default_factory=dict)  # arrays stored with the texture
    frame: dict[str, Any] = field(default_factory=dict)  # temporal inputs for video (previous frame, flow, ...)

    @property
    def patch(self) -> int:
        return self.config.patch_size

    @cached_property
    def grid(self) -> tuple[int, int]:
        return ops.grid_shape(self.image.shape[0], self.image.shape[1], self.patch)

    @cached_property
    def gray(self) -> np.ndarray:
        return ops.to_gray(self.image)

    @cached_property
    def gradients(self) -> tuple[np.ndarray, np.ndarray]:
        return ops.sobel_gradients(self.gray)

    @cached_property
    def segments(self) -> tuple[np.ndarray, np.ndarray]:
        """SLIC labels at working resolution and each segment's mean Lab colour."""
        return ops.superpixels(self.image, self.config.n_segments)

    @cached_property
    def grid_segments(self) -> np.ndarray:
        """(gh, gw) int32: the superpixel under each level-0 tile's centre."""
        return ops.resize_nearest(self.segments[0], self.grid).astype(np.int32)

    def tiles(self, x: np.ndarray) -> np.ndarray:
        """Pixel map (H, W[, C]) -> level-0 tile means (gh, gw[, C])."""
        return ops.tile_mean(x, self.patch)


# ----------------------------------------------------------------------------------------------------------
# Generators


def _rgb_pixels(ctx: EncodeContext) -> np.ndarray:
    return ctx.image.astype(np.float32) * (1.0 / 255.0)


def _rgb(ctx: EncodeContext) -> np.ndarray:
    return ctx.tiles(_rgb_pixels(ctx))


def _edges_pixels(ctx: EncodeContext) -> np.ndarray:
    gx, gy = ctx.gradients
    dark, light = ops.polarity_edges(ctx.gray, gx, gy)
    return np.dstack([dark, light])


def _edges(ctx: EncodeContext) -> np.ndarray:
    return ctx.tiles(_edges_pixels(ctx))


def _frequency_pixels(ctx: EncodeContext) -> np.ndarray:
    high, low = ops.band_energy(ctx.gray)
    return np.dstack([high, low])


def _frequency_finish(t: np.ndarray, patch: int) -> np.ndarray:
    # absolute (not per-image) scaling into [0, 1): printed text reaches ~0.6-0.9, paper or sky ~0
    return (1.0 - np.exp(-t * np.array([12.0, 10.0], dtype=np.float32))).astype(np.float32)


def _frequency(ctx: EncodeContext) -> np.ndarray:
    return _frequency_finish(ctx.tiles(_frequency_pixels(ctx)), ctx.patch)


def _motion(ctx: EncodeContext) -> np.ndarray:
    prev = ctx.frame.get("previous_gray")
    if prev is None or prev.shape != ctx.gray.shape:
        return np.zeros(ctx.grid + (1,), np.float32)  # a still image does not move
    # the tile means of |gray - prev| (ctx.tiles of the difference), from integer sums: exact, several times faster
    return np.minimum(ops.tile_abs_diff(ctx.gray, prev, ctx.patch) * (4.0 / 255.0), 1.0)[..., None]


def _saliency(ctx: EncodeContext) -> np.ndarray:
    sal = ops.spectral_residual_saliency(ctx.gray)
    return ops.resize_map(sal, ctx.grid)[..., None]


def _position(ctx: EncodeContext) -> np.ndarray:
    h, w = ctx.image.shape[:2]
    gh, gw = ctx.grid
    p = ctx.patch
    cy = (np.arange(gh) * p + np.minimum(p, h - np.arange(gh) * p) / 2.0) / h
    cx = (np.arange(gw) * p + np.minimum(p, w - np.arange(gw) * p) / 2.0) / w
    y, x = np.meshgrid(cy, cx, indexing="ij")
    ecc = np.sqrt((x - 0.5) ** 2 + (y - 0.5) ** 2) / math.sqrt(0.5)
    return np.dstack([x, y, ecc]).astype(np.float32)


def _clusters(ctx: EncodeContext) -> np.ndarray:
    labels = ctx.grid_segments
    gh, gw = labels.shape
    n = int(labels.max()) + 1
    yy, xx = np.mgrid[0:gh, 0:gw].astype(np.float32)
    counts = np.bincount(labels.ravel(), minlength=n).astype(np.float32)
    safe = np.maximum(counts, 1.0)
    cy = np.bincount(labels.ravel(), yy.ravel(), minlength=n) / safe
    cx = np.bincount(labels.ravel(), xx.ravel(), minlength=n) / safe
    radius = np.sqrt(np.maximum(counts, 1.0) / math.pi) + 0.5
    dist = np.hypot(yy - cy[labels], xx - cx[labels]) / radius[labels]
    ident = labels / max(n - 1, 1)
    size = counts[labels] / float(gh * gw)
    ctx.tensors["segments"] = labels.astype(np.int32)
    return np.dstack([ident, np.minimum(dist, 1.0), size]).astype(np.float32)


def _boundaries(ctx: EncodeContext) -> np.ndarray:
    """Superpixel boundaries weighted by the CIELAB colour difference across them (an object-boundary proxy)."""
    labels = ctx.grid_segments
    lab = ctx.segments[1]
    strength = np.zeros(labels.shape, np.float32)
    for dy, dx in ((0, 1), (1, 0)):
        a = labels[: labels.shape[0] - dy, : labels.shape[1] - dx]
        b = labels[dy:, dx:]
        de = np.linalg.norm(lab[a] - lab[b], axis=-1) * (a != b)
        s = np.minimum(de / 30.0, 1.0).astype(np.float32)
        strength[: s.shape[0], : s.shape[1]] = np.maximum(strength[: s.shape[0], : s.shape[1]], s)
        strength[dy:, dx:] = np.maximum(strength[dy:, dx:], s)
    return strength[..., None]


def _distance_pixels(ctx: EncodeContext) -> np.ndarray:
    """Distance in px to the nearest Canny edge, found at half resolution.  (H, W, 1) float32."""
    gray = ctx.gray
    h, w = gray.shape
    half = gray if min(h, w) < 64 else ops.resize_map(gray, ((h + 1) // 2, (w + 1) // 2)).astype(np.uint8)
    scale = h / half.shape[0]
    d = ops.distance_to_mask(ops.edge_mask(half)) * scale
    d = ops.resize_map(d, (h, w)) if half.shape != gray.shape else d
    return d[..., None]


def _distance_finish(t: np.ndarray, patch: int) -> np.ndarray:
    return (t / (t + patch)).astype(np.float32)


def _distance(ctx: EncodeContext) -> np.ndarray:
    """Distance to the nearest Canny edge, at half resolution, as d / (d + P) in [0, 1)."""
    return _distance_finish(ctx.tiles(_distance_pixels(ctx)), ctx.patch)


def _absent(ctx: EncodeContext) -> None:
    return None


def _temporal(ctx: EncodeContext) -> np.ndarray | None:
    maps = ctx.frame.get("temporal")  # filled by the video session: (gh, gw, 3)
    return None if maps is None else np.asarray(maps, np.float32)


register_group(ChannelGroup("rgb", ("r", "g", "b"), _rgb, "free", "mean colour of the tile", pixels=_rgb_pixels))
register_group(ChannelGroup("edges", ("edges_dark", "edges_light"), _edges, "low",
                            "Sobel edges split by polarity (dark-on-light, light-on-dark), contrast-normalised",
                            pixels=_edges_pixels))
register_group(ChannelGroup("frequency", ("highpass", "lowpass"), _frequency, "low",
                            "fine-detail energy |I-G1*I| and structure energy |G1*I-G4*I|",
                            pixels=_frequency_pixels, finish=_frequency_finish))
register_group(ChannelGroup("motion", ("motion",), _motion, "free",
                            "temporal difference to the previous frame (0 for still images)"))
register_group(ChannelGroup("saliency", ("saliency",), _saliency, "low", "spectral-residual saliency"))
register_group(ChannelGroup("position", ("x", "y", "eccentricity"), _position, "free",
                            "tile centre in [0,1] and distance from the image centre"))
register_group(ChannelGroup("clusters", ("cluster_id", "cluster_dist", "cluster_size"), _clusters, "medium",
                            "SLIC superpixel (~50): id, distance from its centroid, its size"))
register_group(ChannelGroup("temporal", ("prev_relevance", "prev_saliency", "fixations"), _temporal, "low",
                            "previous relevance and saliency warped by optical flow, fixation history (video)"))
register_group(ChannelGroup("distance", ("edge_distance",), _distance, "low",
                            "distance to the nearest edge, d/(d+P)", pixels=_distance_pixels,
                            finish=_distance_finish))
register_group(ChannelGroup("attention", ("attn_vlm", "attn_accum", "gaze"), _absent, "free",
                            "caller-supplied maps (Texture.attach): VLM attention, accumulated attention, gaze"))
register_group(ChannelGroup("boundaries", ("boundaries",), _boundaries, "low",
                            "superpixel boundaries weighted by colour contrast (object-boundary proxy)"))
# "semantic" and "text" register themselves from foveate.query.semantic and foveate.query.text (imported by the
# package).


def run_groups(ctx: EncodeContext, names: tuple[str, ...], generators: dict[str, Callable] | None = None
               ) -> tuple[np.ndarray, list[str], dict, tuple[str, ...]]:
    """Run the generators of ``names`` in order (``generators`` replaces some by name: same contract).

    Returns:
        ``(x0, channel_names, timings_ms, absent)``: the level-0 texture (gh, gw, C) float32, the channel
        names, milliseconds per group, and the groups present as zeros because their source is missing.
    """
    gh, gw = ctx.grid
    blocks, channels, timings, absent = [], [], {}, []
    for name in names:
        group = get_group(name)
        t0 = time.perf_counter()
        try:
            out = (generators or {}).get(name, group.generator)(ctx)
        except FoveateError:
            raise
        except Exception as exc:
            if not group.fallible:
                raise
            out = None  # degrade: the group is absent and the texture says why
            reason = (str(exc).strip() or type(exc).__name__).splitlines()[0][:200]
            ctx.extras.setdefault("notes", []).append(
                f"the {name} group is absent: its generator failed on this image ({type(exc).__name__}: {reason})")
        timings[name] = (time.perf_counter() - t0) * 1000.0
        if out is None:
            out = np.zeros((gh, gw, len(group.channels)), np.float32)
            absent.append(name)
        out = np.asarray(out, np.float32)
        if out.shape != (gh, gw, len(group.channels)):
            raise RuntimeError(f"channel group {name!r} returned shape {out.shape}, "
                               f"expected {(gh, gw, len(group.channels))}")
        blocks.append(out)
        channels.extend(group.channels)
    x0 = np.concatenate(blocks, axis=-1) if blocks else np.zeros((gh, gw, 0), np.float32)
    return np.clip(np.nan_to_num(x0), 0.0, 1.0), channels, timings, tuple(absent)
