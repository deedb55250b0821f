"""The ``auto`` mode: of the quadtree and the top-k layout, the one under which the likely answer is legible.

The quadtree covers the image with disjoint tiles, so a level-0 tile costs its ancestors' siblings too: a long line
of small print that straddles a coarse tile boundary needs twice the splits, and at 64 tokens it stays blurred.  The
top-k layout (a gist of the coarsest tiles plus level-0 tiles) pays one token per sharp tile but cannot stop at a
coarser level where the text is large enough.  Which is better depends on the page and the question, and a learned
text term says where the answer probably is: the answer ranker's probability for every OCR line (the query maps'
:class:`~foveate.query.base.LikelyLines`).  So ``auto``
makes both layouts (each a millisecond or so) and keeps the one with the larger *expected legible answer*,

    sum over lines and hulls i of  p_i * (share of i's area on tiles fine enough for its text),

where text of height h is legible in a token of scale 2**level when ``h / 2**level >= LEGIBLE_PX`` -- the same rule
as the evaluation's legible coverage -- and h is the OCR box height times the weights' ``text_height`` (OCR boxes
are taller than the print they hold; ``foveate train`` measures the ratio on its training pages).  A hull is a likely
line with a neighbour that may continue its answer (the weights' extent model, at ``p_i q_ij``): an answer over two
lines, or in two pieces on its row, is legible only with the blank between them.  With those lines and hulls
the top-k layout completes them first, most probability per token first (:func:`answer_spans`,
:func:`foveate.selection.topk.lines_first`), so both layouts often make every likely line legible; that tie goes to
the layout that makes more of the page's print legible (where the ranker is wrong, the answer is then read the more
likely): the quadtree where the print is large enough for its coarser tiles (receipts), top-k where only full
resolution reads it (forms).  A query without text, a scorer without a ranker and a page without OCR lines keep the
quadtree; a budget below the quadtree's coarsest cover leaves the top-k layout alone.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable

import numpy as np

from ..core.config import LEGIBLE_PX
from ..core.ops import axis_overlap
from ..query.base import LikelyLines

#: lines under this probability are left out of the expectation (they cannot change it by more than their sum) and
#: are not completed first by the top-k layout
MIN_PROBABILITY = 0.01
#: expected legible answers (and legible shares of the page's print) within this of each other are a tie
MARGIN = 1e-6


def finest_levels(tiles: list[tuple[int, int, int]], grid0: tuple[int, int]) -> np.ndarray:
    """(gh, gw) int64: the finest level among ``tiles`` ``(level, row, col)`` over each level-0 tile (-1: none).
    Painted per level, coarse first, finer levels overwriting."""
    gh, gw = grid0
    out = np.full((gh, gw), -1, np.int64)
    arr = np.fromiter(itertools.chain.from_iterable(tiles), np.int64, 3 * len(tiles)).reshape(-1, 3)
    for lvl in sorted(set(arr[:, 0].tolist()), reverse=True):
        f = 1 << lvl
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
    for lvl in np.flatnonzero(np.bincount(levels.ravel() + 1)[1:]):  # the levels present
        ok = h / np.exp2(lvl) >= min_px
        if ok.any():
            legible[ok] += ((wy[ok] @ (levels == lvl).astype(np.float64)) * wx[ok]).sum(1)
    out = np.zeros(len(b), np.float64)
    np.divide(legible, total, out=out, where=(total > 0) & (h >= min_px))
    return out


def legible_answer(
    tiles: list[tuple[int, int, int]], grid0: tuple[int, int], patch: int, lines: LikelyLines
) -> tuple[float, float]:
    """What ``choose`` weighs a layout by: ``(sum_i p_i * legible_share(region i)`` over the lines and the extent's
    hulls (:attr:`LikelyLines.regions`) with probability >= :data:`MIN_PROBABILITY`, the mean legible share of all
    the lines ``)``."""
    boxes, heights, probs = lines.regions
    share = legible_share(finest_levels(tiles, grid0), patch, boxes, heights)
    keep = np.asarray(probs) >= MIN_PROBABILITY
    expected = float(np.dot(np.asarray(probs, np.float64)[keep], share[keep]))
    n = len(lines.probs)
    return expected, float(share[:n].mean()) if n else 0.0


def answer_spans(lines: LikelyLines, grid0: tuple[int, int], patch: int) -> tuple[np.ndarray, np.ndarray]:
    """The likely lines and hulls (:attr:`LikelyLines.regions`) the top-k layout completes first
    (:func:`foveate.selection.topk.lines_first`): those with probability >= :data:`MIN_PROBABILITY` whose print can be
    legible at all (height >= ``LEGIBLE_PX`` at level 0), as ``(spans (M, 4) int64 (r0, r1, c0, c1) end-exclusive
    ranges of the level-0 tiles each box touches, their probabilities (M,))``."""
    gh, gw = grid0
    boxes, heights, probs = lines.regions
    keep = (probs >= MIN_PROBABILITY) & (heights >= LEGIBLE_PX)
    b = np.asarray(boxes, np.float64).reshape(-1, 4)[keep]
    r0 = np.clip(np.floor(b[:, 1] / patch), 0, gh).astype(np.int64)
    r1 = np.clip(np.ceil(b[:, 3] / patch), 0, gh).astype(np.int64)
    c0 = np.clip(np.floor(b[:, 0] / patch), 0, gw).astype(np.int64)
    c1 = np.clip(np.ceil(b[:, 2] / patch), 0, gw).astype(np.int64)
    return np.stack([r0, np.maximum(r1, r0), c0, np.maximum(c1, c0)], 1), np.asarray(probs, np.float64)[keep]


def tied(expected: Iterable[float]) -> bool:
    """Whether expected legible answers (any iterable of them) are all within :data:`MARGIN` of each other: a tie,
    which :func:`choose` breaks by the page's legible print."""
    vals = [float(v) for v in expected]
    return max(vals) - min(vals) <= MARGIN


def choose(
    candidates: dict[str, Callable[[], list[tuple[int, int, int]]]],
    grid0: tuple[int, int],
    patch: int,
    lines: LikelyLines | None,
) -> tuple[str, list[tuple[int, int, int]], dict[str, float]]:
    """The candidate layout with the largest expected legible answer, on a tie the one that makes more of the page's
    print legible (the mean legible share of all its lines: where the ranker is wrong, the answer is read the more
    likely), on a tie of both the first: (its name, its tiles, every candidate's expectation).  ``candidates`` map
    names to functions making the tiles; without ``lines`` only the first is made, and taken."""
    names = list(candidates)
    if lines is None:
        return names[0], candidates[names[0]](), {}
    got: dict[str, float] = {}
    best, tiles, best_page = names[0], [], -np.inf
    for n in names:
        t = candidates[n]()
        got[n], page = legible_answer(t, grid0, patch, lines)
        if n == names[0] or got[n] > got[best] + MARGIN or (tied((got[n], got[best])) and page > best_page + MARGIN):
            best, tiles, best_page = n, t, page
    return best, tiles, got
