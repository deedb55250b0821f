"""The texture: an image encoded once into per-tile channels with a mean-mip and a max-mip, plus the pixel
pyramid tokens are cut from.  ``encode`` is the heavy step; everything in ``selection`` reads only this.

Storage is channels-last ``(gh_l, gw_l, C)`` per level in float16 (a 40-channel 1024x1024 texture, all five
levels, mean and max, is ~0.87 MB); scoring upcasts to float32 once per texture and caches it.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

import numpy as np
import torch

from ..channels.base import EncodeContext
from ..channels.registry import get_group, resolve_groups, run_groups
from . import ops
from .config import EncodeConfig, replace_config
from .device import COMPUTE_DTYPE, resolve_device, to_storage
from .errors import ConfigError, TextureFormatError
from .fvt import FORMAT_NAME, FORMAT_VERSION, write_file
from .fvt import read_meta as _read_meta
from .io import ImageLike, load_image


def content_hash(image: np.ndarray) -> str:
    """SHA-256 of the decoded RGB pixels and their shape: the same picture in PNG or TIFF hashes the same."""
    h = hashlib.sha256(f"{image.shape[0]}x{image.shape[1]}x3:".encode())
    h.update(np.ascontiguousarray(image).data)
    return h.hexdigest()


_content_hash = content_hash  # encode_array's ``content_hash`` keyword shadows the name


def texture_id(content_hash: str, config: EncodeConfig) -> str:
    """Content-addressed identity: image content hash (first 32 hex digits) + encode config hash."""
    return f"{content_hash[:32]}-{config.hash()}"


#: the :meth:`Texture.derived` key family of :meth:`foveate.query.scorer.Scorer.evaluate`'s query-independent product
#: of the features (dropped by :meth:`Texture.invalidate` with the other products of the features)
CHANNEL_TERMS = "scorer_channel_terms"
#: values :meth:`Texture.derived` keeps per texture; the least recently used goes first
MAX_DERIVED = 16

T = TypeVar("T")


@dataclass
class Texture:
    """An encoded image.  Build with :func:`encode` or :meth:`Texture.load`.

    Attributes:
        image: (H, W, 3) uint8 RGB, the source.
        config: the :class:`EncodeConfig` it was encoded with.
        channels: channel names, in texture order.
        groups: group name -> (start, stop) channel slice.
        absent: groups stored as zeros because their source was not configured.
        mean, max: per level, (gh_l, gw_l, C) tensors in float16 on ``device``.
        coverage: per level, (gh_l, gw_l) float32: fraction of each tile inside the image.
        content_hash: :func:`content_hash` of ``image``.
        timings_ms: encode milliseconds per group (plus ``"decode"``, ``"mips"``, ``"total"``).
        extras: JSON-able data stored with the texture (OCR lines, encoder versions, ...).
        tensors: named arrays stored with the texture (superpixel labels, embeddings, PCA basis, ...).
    """

    image: np.ndarray
    config: EncodeConfig
    channels: tuple[str, ...]
    groups: dict[str, tuple[int, int]]
    absent: tuple[str, ...]
    mean: list[torch.Tensor]
    max: list[torch.Tensor]
    coverage: list[torch.Tensor]
    content_hash: str
    timings_ms: dict[str, float] = field(default_factory=dict)
    extras: dict[str, Any] = field(default_factory=dict)
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)
    #: key -> (depends on the features?, value): see :meth:`derived`
    _derived: OrderedDict[Hashable, tuple[bool, Any]] = field(default_factory=OrderedDict, repr=False, compare=False)
    _derived_lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    # -- geometry ------------------------------------------------------------------------------------------
    @property
    def patch_size(self) -> int:
        return self.config.patch_size

    @property
    def image_size(self) -> tuple[int, int]:
        """(H, W) in source pixels."""
        return int(self.image.shape[0]), int(self.image.shape[1])

    @property
    def num_levels(self) -> int:
        return len(self.mean)

    @property
    def level_shapes(self) -> list[tuple[int, int]]:
        return [(int(m.shape[0]), int(m.shape[1])) for m in self.mean]

    @property
    def num_tiles(self) -> int:
        """Level-0 tiles: what a VLM would spend on the whole image at full resolution."""
        gh, gw = self.level_shapes[0]
        return gh * gw

    @property
    def device(self) -> torch.device:
        return self.mean[0].device

    @property
    def id(self) -> str:
        """Content-addressed identity: image content hash + encode config hash."""
        return texture_id(self.content_hash, self.config)

    def channel_index(self, name: str) -> int:
        try:
            return self.channels.index(name)
        except ValueError:
            raise ConfigError(f"texture has no channel {name!r}; it has {', '.join(self.channels)}") from None

    def channel(self, name: str, level: int = 0, kind: str = "mean") -> np.ndarray:
        """One channel at one level as a (gh_l, gw_l) float32 array (``kind`` is ``"mean"`` or ``"max"``)."""
        stack = {"mean": self.mean, "max": self.max}[kind]
        return stack[level][..., self.channel_index(name)].float().cpu().numpy()

    # -- memory --------------------------------------------------------------------------------------------
    def feature_bytes(self) -> int:
        """Bytes of the feature texture (all levels, mean + max, all channels) as stored."""
        return sum(t.numel() * t.element_size() for t in self.mean + self.max)

    def nbytes(self) -> dict[str, int]:
        """Memory by part: features, coverage, source pixels, stored extras."""
        return {
            "features": self.feature_bytes(),
            "coverage": sum(t.numel() * t.element_size() for t in self.coverage),
            "pixels": int(self.image.nbytes),
            "extras": sum(t.numel() * t.element_size() for t in self.tensors.values()),
        }

    # -- derived values (built on first use, kept in memory, never saved) ----------------------------------
    def derived(self, key: Hashable, build: Callable[[], T], *, features: bool = True) -> T:
        """``build()``, kept for the next call with ``key`` (at most :data:`MAX_DERIVED` values, the least recently
        used dropped first).  What selection and the query terms compute once per texture: the pixel pyramid, the
        flat features, the text index, the uniform layout's tiles per budget, a scorer's product of the features.

        ``features``: the value depends on the feature texture or the pixels, and :meth:`invalidate` (``attach``, a
        video update) and :meth:`to` drop it; ``False`` for what depends on neither (the stored OCR lines).  Threads
        may call this at once: a value two of them build is kept once."""
        with self._derived_lock:
            hit = self._derived.get(key)
            if hit is not None:
                self._derived.move_to_end(key)
                return cast(T, hit[1])
        value = build()
        with self._derived_lock:
            self._derived[key] = (features, value)
            self._derived.move_to_end(key)
            while len(self._derived) > MAX_DERIVED:
                self._derived.popitem(last=False)
        return value

    def derived_keys(self) -> list[Hashable]:
        """The keys of the derived values kept now, least recently used first."""
        with self._derived_lock:
            return list(self._derived)

    def pixel_levels(self) -> list[np.ndarray]:
        """Pixel pyramid, level l of shape (gh_l * P, gw_l * P, 3) uint8 (see ``ops.pixel_pyramid``)."""
        return self.derived(
            ("pixels",), lambda: ops.pixel_pyramid(self.image, self.patch_size, self.level_shapes), features=False
        )

    def flat_features(self) -> tuple[torch.Tensor, list[int]]:
        """All levels' [mean | max] stacked: (N_total, 2C) float32 on ``device``, and level start offsets."""
        return self.derived(("flat",), self._flat)

    def _flat(self) -> tuple[torch.Tensor, list[int]]:
        offsets: list[int] = np.cumsum([0] + [m.shape[0] * m.shape[1] for m in self.mean]).tolist()
        if self.device.type == "cpu":  # NumPy, single-threaded: for arrays this small torch's intra-op threads
            # cost more than they save, and keep spinning into whatever the process does next (video: +4 ms a frame
            # on a busy 2-core machine)
            c = len(self.channels)
            flat = np.concatenate(
                [
                    np.concatenate([m.numpy().reshape(-1, c), x.numpy().reshape(-1, c)], axis=1)
                    for m, x in zip(self.mean, self.max)
                ],
                axis=0,
            )
            return torch.from_numpy(flat.astype(np.float32)), offsets
        rows = [
            torch.cat([m.reshape(-1, m.shape[-1]), x.reshape(-1, x.shape[-1])], dim=1)
            for m, x in zip(self.mean, self.max)
        ]
        return torch.cat(rows, 0).to(COMPUTE_DTYPE), offsets

    def invalidate(self) -> None:
        """Drop the derived values that depend on the features or pixels, after they changed (``attach``, video
        updates)."""
        with self._derived_lock:
            for key in [k for k, (features, _) in self._derived.items() if features]:
                del self._derived[key]

    def to(self, device: str | torch.device | None) -> Texture:
        """Move the feature tensors to ``device`` (in place; returns self)."""
        dev = resolve_device(device)
        self.mean = [t.to(dev) for t in self.mean]
        self.max = [t.to(dev) for t in self.max]
        self.coverage = [t.to(dev) for t in self.coverage]
        self.invalidate()
        return self

    # -- caller-supplied channels -------------------------------------------------------------------------
    def attach(self, name: str, values: np.ndarray | torch.Tensor, normalize: bool = True) -> None:
        """Attach a caller map (gaze heat map, VLM attention, ...) of any resolution as a channel.

        ``name`` is one of the attention group's channels (``attn_vlm``, ``attn_accum``, ``gaze``) when the
        texture has that group, filling its slot; any other name is appended as a new channel ``user:<name>``
        (or replaces an earlier one of that name).  The map is resampled to the level-0 grid (area-averaged
        when shrinking), scaled to [0, 1] by its maximum when ``normalize``, and mipped.
        """
        arr = values.detach().float().cpu().numpy() if isinstance(values, torch.Tensor) else np.asarray(values)
        arr = np.squeeze(arr)
        if arr.ndim != 2 or arr.size == 0:
            raise ConfigError(f"an attached map must be 2-D (H x W), got shape {tuple(np.shape(values))}")
        arr = np.nan_to_num(arr.astype(np.float32))
        grid = ops.resize_map(arr, self.level_shapes[0])
        if normalize:
            lo = float(grid.min())
            grid = grid - min(lo, 0.0)
            hi = float(grid.max())
            grid = grid / hi if hi > 0 else grid
        grid = np.clip(grid, 0.0, 1.0)
        means, maxes, _ = ops.build_mips(grid[..., None], self.coverage[0].cpu().numpy(), self.num_levels)
        key = name if name in self.channels and not name.startswith("user:") else f"user:{name}"
        if key in self.channels:
            i = self.channels.index(key)
            for lvl in range(self.num_levels):
                self.mean[lvl][..., i] = torch.from_numpy(means[lvl][..., 0]).to(self.mean[lvl])
                self.max[lvl][..., i] = torch.from_numpy(maxes[lvl][..., 0]).to(self.max[lvl])
        else:
            c = len(self.channels)
            self.channels = self.channels + (key,)
            start, _ = self.groups.get("user", (c, c))
            self.groups["user"] = (start, c + 1)
            for lvl in range(self.num_levels):
                self.mean[lvl] = torch.cat([self.mean[lvl], torch.from_numpy(means[lvl]).to(self.mean[lvl])], -1)
                self.max[lvl] = torch.cat([self.max[lvl], torch.from_numpy(maxes[lvl]).to(self.max[lvl])], -1)
        if "attention" in self.absent and key in self.channels[slice(*self.groups.get("attention", (0, 0)))]:
            self.absent = tuple(g for g in self.absent if g != "attention")
        self.extras.setdefault("attached", [])
        if key not in self.extras["attached"]:
            self.extras["attached"].append(key)
        self.invalidate()

    # -- persistence ---------------------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """The ``.fvt`` file as bytes: safetensors (pixels, mips, extras) with JSON metadata."""
        from safetensors.numpy import save as st_save

        arrays: dict[str, np.ndarray] = {"image": np.ascontiguousarray(self.image)}
        for lvl in range(self.num_levels):
            arrays[f"mean.{lvl}"] = self.mean[lvl].cpu().numpy()
            arrays[f"max.{lvl}"] = self.max[lvl].cpu().numpy()
            arrays[f"coverage.{lvl}"] = self.coverage[lvl].cpu().numpy()
        for k, t in self.tensors.items():
            arrays[f"extra.{k}"] = t.cpu().numpy()
        meta = {
            "format": FORMAT_NAME,
            "format_version": FORMAT_VERSION,
            "config": self.config.to_dict(),
            "config_hash": self.config.hash(),
            "content_hash": self.content_hash,
            "channels": list(self.channels),
            "groups": {k: list(v) for k, v in self.groups.items()},
            "absent": list(self.absent),
            "timings_ms": self.timings_ms,
            "extras": self.extras,
        }
        return st_save(arrays, metadata={"foveate": json.dumps(meta)})

    def save(self, path: str | Path) -> Path:
        """Write a ``.fvt`` file atomically (temporary file + rename: a crash leaves no partial file)."""
        return write_file(path, self.to_bytes())

    @classmethod
    def load(
        cls,
        path: str | Path | bytes | Mapping[str, Any],
        device: str | torch.device | None = "cpu",
        verify: bool = True,
    ) -> Texture:
        """Read a ``.fvt`` file, its bytes, or a row of a texture dataset (a mapping with a ``texture`` column, as
        Ray, pandas or pyarrow give rows; see :mod:`foveate.ray`).  Encodes nothing.  A corrupt file or another
        format version raises :class:`TextureFormatError`; ``verify`` re-hashes the pixels against the stored
        content hash."""
        if isinstance(path, (bytes, bytearray, memoryview)):
            return cls.from_bytes(bytes(path), device=device, verify=verify)
        if isinstance(path, Mapping):
            name = str(path.get("id") or path.get("source") or "<row>")
            if path.get("texture") is None:
                why = path.get("error") or f"a duplicate: the texture is on the row of id {path.get('id')} that has one"
                raise TextureFormatError(f"{name}: this dataset row holds no texture ({why})")
            return cls.from_bytes(bytes(path["texture"]), device=device, verify=verify, name=name)
        path = Path(path)
        if not path.is_file():
            raise TextureFormatError(f"{path}: no such texture file")
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise TextureFormatError(f"{path}: cannot read ({exc})") from exc
        return cls.from_bytes(data, device=device, verify=verify, name=str(path))

    @classmethod
    def from_bytes(
        cls, data: bytes, device: str | torch.device | None = "cpu", verify: bool = True, name: str = "<bytes>"
    ) -> Texture:
        from safetensors import SafetensorError
        from safetensors.numpy import load as st_load

        meta = _read_meta(data, name)
        try:
            arrays = st_load(data)
        except (SafetensorError, ValueError, OSError) as exc:
            raise TextureFormatError(f"{name}: corrupt texture file ({exc})") from exc
        try:
            config = EncodeConfig.from_dict(meta["config"])
            n_levels = sum(1 for k in arrays if k.startswith("mean."))
            dev = resolve_device(device)
            tex = cls(
                image=arrays["image"],
                config=config,
                channels=tuple(meta["channels"]),
                groups={k: tuple(v) for k, v in meta["groups"].items()},
                absent=tuple(meta["absent"]),
                mean=[torch.from_numpy(arrays[f"mean.{i}"]).to(dev) for i in range(n_levels)],
                max=[torch.from_numpy(arrays[f"max.{i}"]).to(dev) for i in range(n_levels)],
                coverage=[torch.from_numpy(arrays[f"coverage.{i}"]).to(dev) for i in range(n_levels)],
                content_hash=meta["content_hash"],
                timings_ms=dict(meta.get("timings_ms", {})),
                extras=dict(meta.get("extras", {})),
                tensors={k[len("extra.") :]: torch.from_numpy(v) for k, v in arrays.items() if k.startswith("extra.")},
            )
        except KeyError as exc:
            raise TextureFormatError(f"{name}: incomplete texture file (missing {exc})") from exc
        except (TypeError, ValueError, AttributeError) as exc:  # a field of the wrong kind (a null config, ...)
            raise TextureFormatError(f"{name}: damaged texture file ({exc})") from exc
        if config.hash() != meta.get("config_hash"):
            raise TextureFormatError(
                f"{name}: written by an encoder with different settings (config hash "
                f"{meta.get('config_hash')} != {config.hash()}); encode the image again"
            )
        levels = [tuple(t.shape for t in ts) for ts in zip(tex.mean, tex.max, tex.coverage)]
        if not ops.pyramid_fits(tex.image.shape, config.patch_size, len(tex.channels), levels):
            raise TextureFormatError(f"{name}: inconsistent texture file (levels or channels do not match)")
        if not all(bool(torch.isfinite(t).all()) for t in tex.mean + tex.max + tex.coverage):
            raise TextureFormatError(f"{name}: damaged texture file (features that are not finite numbers)")
        if verify and content_hash(tex.image) != tex.content_hash:
            raise TextureFormatError(f"{name}: pixel data does not match its content hash (corrupt file)")
        return tex


def compute_channels(
    image: np.ndarray, config: EncodeConfig, frame: dict[str, Any] | None = None
) -> tuple[np.ndarray, list[str], dict[str, float], tuple[str, ...], EncodeContext]:
    """Run the configured channel generators on an RGB image.  The heavy part of :func:`encode`."""
    ctx = EncodeContext(image=image, config=config, frame=frame or {})
    names = resolve_groups(config)
    x0, channels, timings, absent = run_groups(ctx, names)
    return x0, channels, timings, absent, ctx


def encode(
    image: ImageLike,
    config: EncodeConfig | None = None,
    *,
    preset: str | None = None,
    device: str | torch.device | None = None,
    **overrides: Any,
) -> Texture:
    """Encode an image once into a :class:`Texture`.

    Args:
        image: path, bytes, NumPy array, PIL image or torch tensor (see ``foveate.core.io``).
        config: an :class:`EncodeConfig`; ``preset`` and keyword ``overrides`` (``patch_size=...``) replace
            its fields.
        device: where the feature tensors live (``None`` = CUDA if available, else CPU).
    """
    config = config or EncodeConfig()
    if preset is not None:
        overrides["preset"] = preset
    config = replace_config(config, overrides)
    resolve_groups(config)  # fail on a bad preset before decoding anything
    dev = resolve_device(device)
    t0 = time.perf_counter()
    rgb = load_image(image, max_pixels=config.max_pixels)
    t1 = time.perf_counter()
    return encode_array(rgb, config, dev, decode_ms=(t1 - t0) * 1000.0)


def encode_array(
    rgb: np.ndarray,
    config: EncodeConfig,
    device: str | torch.device | None = None,
    decode_ms: float = 0.0,
    frame: dict[str, Any] | None = None,
    *,
    content_hash: str | None = None,
) -> Texture:
    """:func:`encode` for an already decoded (H, W, 3) uint8 array.  ``content_hash``: :func:`content_hash` of
    ``rgb`` when the caller has already computed it (the pixels are not hashed again)."""
    dev = device if isinstance(device, torch.device) else resolve_device(device)
    t0 = time.perf_counter()
    x0, channels, timings, absent, ctx = compute_channels(rgb, config, frame)
    t1 = time.perf_counter()
    h, w = rgb.shape[:2]
    gh, gw = ops.grid_shape(h, w, config.patch_size)
    n_levels = ops.num_levels(gh, gw, config.max_levels)
    means, maxes, covs = ops.build_mips(x0, ops.coverage0(h, w, config.patch_size), n_levels)
    t2 = time.perf_counter()
    groups, start = {}, 0
    for name in resolve_groups(config):
        n = len(get_group(name).channels)
        groups[name] = (start, start + n)
        start += n
    timings.update({"decode": decode_ms, "mips": (t2 - t1) * 1000.0, "channels": (t1 - t0) * 1000.0})
    tex = Texture(
        image=rgb,
        config=config,
        channels=tuple(channels),
        groups=groups,
        absent=absent,
        mean=to_storage(means, dev),
        max=to_storage(maxes, dev),
        coverage=[torch.from_numpy(c).to(dev) for c in covs],
        content_hash=content_hash if content_hash is not None else _content_hash(rgb),
        timings_ms=timings,
        extras=dict(ctx.extras),
        tensors={k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in ctx.tensors.items()},
    )
    tex.timings_ms["total"] = decode_ms + (time.perf_counter() - t0) * 1000.0
    return tex
