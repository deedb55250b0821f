"""The *oracle* baseline: the same selection procedure as foveate's, driven by the ground-truth boxes -- an upper
reference at the budget."""

from __future__ import annotations

import numpy as np

from ..core.config import SelectConfig
from ..selection import quadtree_select, topk_split
from .metrics import DEFAULT_MIN_PX, legible_level


def _tile_overlap(shape: tuple[int, int], side: int, boxes: np.ndarray) -> np.ndarray:
    """(gh, gw) float64: summed area of ``boxes`` (N, 4) inside each tile of a grid of ``side`` px tiles."""
    gh, gw = shape
    out = np.zeros(shape, np.float64)
    edges_y, edges_x = np.arange(gh) * side, np.arange(gw) * side
    for x0, y0, x1, y1 in boxes:
        fy = np.clip(np.minimum(edges_y + side, y1) - np.maximum(edges_y, y0), 0, None)
        fx = np.clip(np.minimum(edges_x + side, x1) - np.maximum(edges_x, x0), 0, None)
        out += np.outer(fy, fx)
    return out


def oracle_tiles(
    shapes: list[tuple[int, int]],
    patch: int,
    gt_boxes: np.ndarray,
    text_heights: np.ndarray | None,
    config: SelectConfig,
    min_px: float = DEFAULT_MIN_PX,
) -> list[tuple[int, int, int]]:
    """A selection that knows the boxes, made by the same procedure as ``config.mode``, never over budget.

    * quadtree: :func:`quadtree_select` with priority = the area of the boxes inside a tile that are not yet
      legible at its level (``legible_level`` of their text height), so splits go where boxes still need detail;
    * topk: the same gist, then the level-0 tiles holding the most legible-able box area (then any box area);
    * auto: of those two, the one leaving more of the boxes' area legible (the quadtree on ties).

    Greedy, so an upper reference at this budget rather than a proven optimum.
    """
    heights = gt_boxes[:, 3] - gt_boxes[:, 1] if text_heights is None else text_heights
    if config.mode == "auto":
        from ..selection.auto import finest_levels, legible_share
        from ..selection.quadtree import covers

        picks = [
            oracle_tiles(shapes, patch, gt_boxes, text_heights, config.replace(mode=m), min_px)
            for m in ("quadtree", "topk")
            if m == "topk" or covers(shapes, config.budget)
        ]
        area = (gt_boxes[:, 2] - gt_boxes[:, 0]) * (gt_boxes[:, 3] - gt_boxes[:, 1])
        legible_area = [
            float(np.dot(area, legible_share(finest_levels(t, shapes[0]), patch, gt_boxes, heights, min_px)))
            for t in picks
        ]
        return picks[int(np.argmax(legible_area))]  # the first of equals: the quadtree
    lmax = np.array([legible_level(float(h), min_px) for h in heights], np.int64)
    if config.mode == "quadtree":
        score = []
        for lvl, shape in enumerate(shapes):
            blurry = gt_boxes[(lmax >= 0) & (lmax < lvl)]  # legible only below this level
            score.append(np.log(_tile_overlap(shape, patch << lvl, blurry) + 1e-9))
        need = [np.ones(s) for s in shapes]
        return quadtree_select(score, need, config.budget, area_exponent=0.0, min_level=config.min_level)
    g, k = topk_split(shapes, config.budget, config.gist)
    gh, gw = shapes[0]
    legible = _tile_overlap(shapes[0], patch, gt_boxes[lmax >= 0]).ravel()
    anybox = _tile_overlap(shapes[0], patch, gt_boxes).ravel()
    order = np.lexsort((np.arange(gh * gw), -anybox, -legible))[:k]
    return g + [(0, int(i) // gw, int(i) % gw) for i in order]
