"""The ``auto`` mode: of the quadtree and the top-k layout, the one under which the likely answer is legible.

The quadtree covers the image with disjoint tiles, so a level-0 tile costs its ancestors' siblings too: a long line
of small print that straddles a coarse tile boundary needs twice the splits, and at 64 tokens it stays blurred.  The
top-k layout (a gist of the coarsest tiles plus level-0 tiles) pays one token per sharp tile but cannot stop at a
coarser level where the text is large enough.  Which is better depends on the page and the question, and a learned
text term says where the answer probably is: the answer ranker's probability for every OCR line (the query maps'
:class:`~foveate.query.base.LikelyLines`).  So ``auto``
makes the quadtree, and the top-k layout too when the quadtree leaves some of that probability blurred (each a
millisecond or two), and keeps the one with the larger *expected legible answer*,

    sum over lines i of  p_i * (share of line i's area on tiles fine enough for its text),

where text of height h is legible in a token of scale 2**level when ``h / 2**level >= LEGIBLE_PX`` -- the same rule
as the evaluation's legible coverage -- and h is the OCR box height times the weights' ``text_height`` (OCR boxes
are taller than the print they hold; ``foveate train`` measures the ratio on its training pages).  Ties, a query
without text, a scorer without a ranker and a page without OCR lines keep the quadtree; a budget below the
quadtree's coarsest cover leaves the top-k layout alone.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..core.config import LEGIBLE_PX
from ..core.ops import axis_overlap
from ..query.base import LikelyLines

#: lines under this probability are left out of the expectation (they cannot change it by more than their sum)
MIN_PROBABILITY = 0.01
#: topk must beat the quadtree's expected legible answer by more than this to be chosen
MARGIN = 1e-6


def finest_levels(tiles: list[tuple[int, int, int]], grid0: tuple[int, int]) -> np.ndarray:
    """(gh, gw) int64: the finest level among ``tiles`` ``(level, row, col)`` over each level-0 tile (-1: none).
    Painted per level, coarse first, finer levels overwriting."""
    gh, gw = grid0
    out = np.full((gh, gw), -1, np.int64)
    arr = np.asarray(tiles, np.int64).reshape(-1, 3)
    for lvl in np.unique(arr[:, 0])[::-1]:
        f = 1 << int(lvl)
        pick = arr[arr[:, 0] == lvl]
        hit = np.zeros((-(-gh // f), -(-gw // f)), bool)
        hit[pick[:, 1], pick[:, 2]] = True
        out[np.repeat(np.repeat(hit, f, axis=0), f, axis=1)[:gh, :gw]] = lvl
    return out


def legible_share(
    levels: np.ndarray, patch: int, boxes: np.ndarray, heights: np.ndarray, min_px: float = LEGIBLE_PX
) -> np.ndarray:
    """(N,) float64: the share of each box's area on level-0 tiles whose finest selected level keeps text of its
    height legible (``height / 2**level >= min_px``).  ``levels`` from :func:`finest_levels`; boxes in pixels.

    Every box at once: a box's area on a tile is the product of its overlaps with the tile's row and column, so its
    area on the tiles of one level is ``wy @ (levels == level) @ wx``; the share sums that over the levels legible
    for its height."""
    gh, gw = levels.shape
    b = np.asarray(boxes, np.float64).reshape(-1, 4)
    h = np.asarray(heights, np.float64).reshape(-1)
    if not len(b):
        return np.zeros(0, np.float64)
    wy, wx = axis_overlap(b[:, 1], b[:, 3], gh, patch), axis_overlap(b[:, 0], b[:, 2], gw, patch)  # (N, gh), (N, gw) px
    total = wy.sum(1) * wx.sum(1)
    legible = np.zeros(len(b), np.float64)
    for lvl in np.unique(levels[levels >= 0]):
        ok = h / np.exp2(lvl) >= min_px
        if ok.any():
            legible[ok] += ((wy[ok] @ (levels == lvl).astype(np.float64)) * wx[ok]).sum(1)
    out = np.zeros(len(b), np.float64)
    np.divide(legible, total, out=out, where=(total > 0) & (h >= min_px))
    return out


def expected_legible(
    tiles: list[tuple[int, int, int]],
    grid0: tuple[int, int],
    patch: int,
    boxes: np.ndarray,
    heights: np.ndarray,
    probs: np.ndarray,
) -> float:
    """``sum_i probs[i] * legible_share(line i)`` over the lines with probability >= :data:`MIN_PROBABILITY`."""
    keep = np.nonzero(np.asarray(probs) >= MIN_PROBABILITY)[0]
    if not len(keep):
        return 0.0
    share = legible_share(finest_levels(tiles, grid0), patch, boxes[keep], heights[keep])
    return float(np.dot(np.asarray(probs, np.float64)[keep], share))


def choose(
    candidates: dict[str, Callable[[], list[tuple[int, int, int]]]],
    grid0: tuple[int, int],
    patch: int,
    lines: LikelyLines | None,
) -> tuple[str, list[tuple[int, int, int]], dict[str, float]]:
    """The candidate layout with the largest expected legible answer: (its name, its tiles, every computed
    candidate's expectation).  ``candidates`` map names to functions making the tiles, the default (kept on ties)
    first; the others are not made when ``lines`` is None or the default already makes every likely line legible."""
    names = list(candidates)
    best, tiles = names[0], candidates[names[0]]()
    if lines is None:
        return best, tiles, {}
    reachable = float(lines.probs[lines.probs >= MIN_PROBABILITY].sum())  # what a layout making every line legible gets
    got = {best: expected_legible(tiles, grid0, patch, lines.boxes, lines.heights, lines.probs)}
    for n in names[1:]:
        if got[best] >= reachable - MARGIN:  # nothing left to gain
            break
        t = candidates[n]()
        got[n] = expected_legible(t, grid0, patch, lines.boxes, lines.heights, lines.probs)
        if got[n] > got[best] + MARGIN:
            best, tiles = n, t
    return best, tiles, got
