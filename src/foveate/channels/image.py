"""The image channel groups: colour, edges, frequency, motion, saliency, position, superpixel clusters, the video's
temporal maps, distance to edges, caller attention and boundaries (the DESIGN.md layout without ``semantic`` and
``text``, which have modules of their own).  Each is a :class:`~.base.ChannelGroup` constant; :mod:`.registry`
registers them."""

from __future__ import annotations

import math

import numpy as np

from ..core import ops
from .base import ChannelGroup, EncodeContext


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
    out: np.ndarray = (1.0 - np.exp(-t * np.array([12.0, 10.0], dtype=np.float32))).astype(np.float32)
    return out


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
    out: np.ndarray = (t / (t + patch)).astype(np.float32)
    return out


def _distance(ctx: EncodeContext) -> np.ndarray:
    """Distance to the nearest Canny edge, at half resolution, as d / (d + P) in [0, 1)."""
    return _distance_finish(ctx.tiles(_distance_pixels(ctx)), ctx.patch)


def _absent(ctx: EncodeContext) -> None:
    return None


def _temporal(ctx: EncodeContext) -> np.ndarray | None:
    maps = ctx.frame.get("temporal")  # filled by the video session: (gh, gw, 3)
    return None if maps is None else np.asarray(maps, np.float32)


RGB = ChannelGroup("rgb", ("r", "g", "b"), _rgb, "free", "mean colour of the tile", pixels=_rgb_pixels)
EDGES = ChannelGroup(
    "edges",
    ("edges_dark", "edges_light"),
    _edges,
    "low",
    "Sobel edges split by polarity (dark-on-light, light-on-dark), contrast-normalised",
    pixels=_edges_pixels,
)
FREQUENCY = ChannelGroup(
    "frequency",
    ("highpass", "lowpass"),
    _frequency,
    "low",
    "fine-detail energy |I-G1*I| and structure energy |G1*I-G4*I|",
    pixels=_frequency_pixels,
    finish=_frequency_finish,
)
MOTION = ChannelGroup(
    "motion", ("motion",), _motion, "free", "temporal difference to the previous frame (0 for still images)"
)
SALIENCY = ChannelGroup("saliency", ("saliency",), _saliency, "low", "spectral-residual saliency")
POSITION = ChannelGroup(
    "position", ("x", "y", "eccentricity"), _position, "free", "tile centre in [0,1] and distance from the image centre"
)
CLUSTERS = ChannelGroup(
    "clusters",
    ("cluster_id", "cluster_dist", "cluster_size"),
    _clusters,
    "medium",
    "SLIC superpixel (~50): id, distance from its centroid, its size",
)
TEMPORAL = ChannelGroup(
    "temporal",
    ("prev_relevance", "prev_saliency", "fixations"),
    _temporal,
    "low",
    "previous relevance and saliency warped by optical flow, fixation history (video)",
)
DISTANCE = ChannelGroup(
    "distance",
    ("edge_distance",),
    _distance,
    "low",
    "distance to the nearest edge, d/(d+P)",
    pixels=_distance_pixels,
    finish=_distance_finish,
)
ATTENTION = ChannelGroup(
    "attention",
    ("attn_vlm", "attn_accum", "gaze"),
    _absent,
    "free",
    "caller-supplied maps (Texture.attach): VLM attention, accumulated attention, gaze",
)
BOUNDARIES = ChannelGroup(
    "boundaries",
    ("boundaries",),
    _boundaries,
    "low",
    "superpixel boundaries weighted by colour contrast (object-boundary proxy)",
)
