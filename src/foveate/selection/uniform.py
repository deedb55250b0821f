"""The ``uniform`` layout: the whole image resized by one factor so that its P x P tiles fit the budget -- what a
standard VLM does with a picture, and the floor foveate's learned selection never falls below (:mod:`.floor`).

Pure geometry plus the one pixel operation (an area resize of the source image) that cuts its tokens.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ..core.errors import BudgetError


def uniform_scale(image_size: tuple[int, int], patch: int, budget: int) -> float:
    """The smallest downscale s >= 1 at which the image, resized to (H/s, W/s), fits in ``budget`` tiles of
    ``patch`` px: ``ceil(W / (s P)) * ceil(H / (s P)) <= budget``.  The tile count only changes where W/(sP)
    or H/(sP) is a whole number, so the answer is one of those breakpoints (or 1)."""
    h, w = image_size
    if budget < 1:
        raise BudgetError(f"budget must be at least 1 token, got {budget}")
    return _uniform_scale(int(h), int(w), int(patch), int(budget))


@functools.lru_cache(maxsize=1024)  # asked per select by the floor gate: a few sizes and budgets in practice
def _uniform_scale(h: int, w: int, patch: int, budget: int) -> float:
    def count(s: float) -> int:
        return math.ceil(w / (s * patch) - 1e-9) * math.ceil(h / (s * patch) - 1e-9)

    cands = {1.0} | {side / (k * patch) for side in (w, h) for k in range(1, math.ceil(side / patch) + 1)}
    return min(s for s in cands if s >= 1.0 and count(s) <= budget)


def uniform_grid(image_size: tuple[int, int], patch: int, budget: int) -> tuple[np.ndarray, float, tuple[int, int]]:
    """The uniform layout's tiles: ``(boxes, s, (ny, nx))``, boxes (ny * nx, 4) float64 in source pixels in raster
    order, each ``s * patch`` px square (clipped at the right and bottom edges), s from :func:`uniform_scale`."""
    h, w = image_size
    s = uniform_scale(image_size, patch, budget)
    side = s * patch
    nx, ny = math.ceil(w / side - 1e-9), math.ceil(h / side - 1e-9)
    xs = np.minimum(np.arange(nx + 1) * side, w)
    ys = np.minimum(np.arange(ny + 1) * side, h)
    gx0, gy0 = np.meshgrid(xs[:-1], ys[:-1])
    gx1, gy1 = np.meshgrid(xs[1:], ys[1:])
    return np.stack([gx0.ravel(), gy0.ravel(), gx1.ravel(), gy1.ravel()], -1), s, (ny, nx)


def cut_uniform(image: np.ndarray, scale: float, patch: int, grid: tuple[int, int]) -> np.ndarray:
    """The uniform layout's tokens: ``image`` (H, W, 3) uint8 area-resized by ``1 / scale``, padded (edge) to the
    grid and cut into (ny * nx, P, P, 3) uint8 tiles in raster order."""
    import cv2

    h, w = image.shape[:2]
    ny, nx = grid
    small = (
        image
        if scale == 1.0
        else cv2.resize(
            image,
            (max(1, min(nx * patch, round(w / scale))), max(1, min(ny * patch, round(h / scale)))),
            interpolation=cv2.INTER_AREA,
        )
    )
    sh, sw = small.shape[:2]
    canvas = np.pad(small, ((0, ny * patch - sh), (0, nx * patch - sw), (0, 0)), mode="edge")
    return canvas.reshape(ny, patch, nx, patch, 3).transpose(0, 2, 1, 3, 4).reshape(ny * nx, patch, patch, 3)
