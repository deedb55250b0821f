"""What a channel group is (:class:`ChannelGroup`) and what its generator reads (:class:`EncodeContext`).

A group's generator maps an :class:`EncodeContext` to a level-0 tile map ``(gh, gw, len(channels))`` float32 in
[0, 1] -- or ``None`` when its source is not configured (no video, no semantic model, no caller map); such a group is
then stored as zeros and reported in ``Texture.absent``.  The built-in groups live beside this module (``image``,
``text``, ``semantic``); :mod:`.registry` registers them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from ..core import ops
from ..core.config import EncodeConfig

#: ``fn(ctx) -> (gh, gw, C) float32 | None``: a group's generator
Generator = Callable[["EncodeContext"], np.ndarray | None]


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
        background: slow, and spends its time in code that releases the GIL (model inference): an encode may
            start it on a worker thread before the other groups and collect it in its turn
            (:func:`foveate.core.device.encode_overlap` decides).  It must read only ``ctx.image``, ``ctx.config``,
            ``ctx.grid`` and inputs the caller put in ``ctx.frame`` before the encode (a PDF page's text layer), and
            write only its own keys of ``ctx.extras`` / ``ctx.tensors``.
        fallible: the generator runs a model that may fail on a valid image (OCR on a 10x10000 strip): an
            exception that is not a ``FoveateError`` leaves the group absent, with a note in
            ``Texture.extras["notes"]``, instead of failing the encode.
    """

    name: str
    channels: tuple[str, ...]
    generator: Generator
    cost: str
    description: str
    pixels: Callable[[EncodeContext], np.ndarray] | None = None
    finish: Callable[[np.ndarray, int], np.ndarray] | None = None
    background: bool = False
    fallible: bool = False


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
