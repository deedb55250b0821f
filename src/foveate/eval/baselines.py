"""The baselines foveate is compared with at the same budget, as pure functions from geometry to :class:`Tokens`
(boxes + scale per token): *uniform* (the whole image resized to fit the budget) and *random* (level-0 tiles plus
the top-k gist); *oracle* is in ``oracle``; *query-blind* is foveate with no query, and *full* (every level-0 tile,
over any budget) is the reference the metric itself allows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..selection import Selection, tile_geometry, topk_split
from ..selection.uniform import uniform_grid, uniform_scale  # noqa: F401  (uniform_scale: re-exported)

#: every comparison row, in table order (``foveate:<variant>`` rows follow ``foveate``)
BASELINES = ("uniform", "random", "query_blind", "oracle", "full")
METHOD_LABELS = {
    "foveate": "foveate",
    "uniform": "uniform",
    "random": "random",
    "query_blind": "query-blind",
    "oracle": "oracle",
    "full": "full image",
}
METHOD_HELP = {
    "foveate": "foveate with the query",
    "uniform": "the whole image resized to fit the budget on a P x P grid (what a standard VLM does)",
    "random": "random level-0 tiles plus the same gist, mean of the seeds",
    "query_blind": "foveate with the query ignored (saliency only)",
    "oracle": "the same selection procedure driven by the ground-truth boxes (an upper reference at this budget)",
    "full": "every level-0 tile: the reference, over any budget",
}


@dataclass
class Tokens:
    """A set of tokens: boxes (K, 4) in source pixels and scales (K,) = source pixels per token pixel."""

    boxes: np.ndarray
    scales: np.ndarray

    def __len__(self) -> int:
        return int(len(self.scales))

    @classmethod
    def from_tiles(
        cls, tiles: Sequence[tuple[int, int, int]], image_size: tuple[int, int], patch: int, grid0: tuple[int, int]
    ) -> Tokens:
        arr = np.array(tiles, np.int64).reshape(-1, 3)
        boxes, _, _ = tile_geometry(arr[:, 0], arr[:, 1], arr[:, 2], image_size, patch, grid0)
        return cls(boxes.astype(np.float64), np.exp2(arr[:, 0].astype(np.float64)))

    @classmethod
    def from_selection(cls, sel: Selection) -> Tokens:
        return cls(sel.boxes.astype(np.float64), np.asarray(sel.scales, np.float64))


def uniform_tokens(image_size: tuple[int, int], patch: int, budget: int) -> Tokens:
    """The uniform baseline's grid: tiles of ``s * patch`` source px (s from :func:`uniform_scale`); the same
    layout ``select(..., mode="uniform")`` sends."""
    boxes, s, _ = uniform_grid(image_size, patch, budget)
    return Tokens(boxes, np.full(len(boxes), s))


def uniform_view(image: np.ndarray, scale: float) -> np.ndarray:
    """What the uniform baseline shows the VLM, back at the source size (for OCR, like the mosaic):
    area-downsampled by ``scale``, then bilinear upsampled.  (H, W, 3) uint8."""
    import cv2

    if scale <= 1.0:
        return image
    h, w = image.shape[:2]
    small = cv2.resize(image, (max(1, round(w / scale)), max(1, round(h / scale))), interpolation=cv2.INTER_AREA)
    return cv2.resize(small, (w, h), interpolation=cv2.INTER_LINEAR)


def random_tiles(
    shapes: list[tuple[int, int]], budget: int, gist: bool, rng: np.random.Generator
) -> list[tuple[int, int, int]]:
    """The random baseline: the top-k gist (when ``gist`` and it fits) plus distinct random level-0 tiles,
    ``min(budget, gist + all level-0 tiles)`` in all."""
    g, k = topk_split(shapes, budget, gist)
    gh, gw = shapes[0]
    idx = rng.choice(gh * gw, size=k, replace=False)
    return g + [(0, int(i) // gw, int(i) % gw) for i in idx]
