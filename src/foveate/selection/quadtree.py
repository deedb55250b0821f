"""The ``quadtree`` strategy (pure: per-level arrays in, tiles out): start from the coarsest level's tiles (they
cover the image) and repeatedly split the leaf with the highest ``relevance * need * (2**level) ** area_exponent``
into its children, while the budget allows.  Leaves are disjoint and cover the image; the token count never
exceeds the budget."""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

import numpy as np

from ..core.errors import BudgetError


def _cover_error(budget: int, gh: int, gw: int, size: str = "") -> BudgetError:
    return BudgetError(
        f"budget {budget} is below the {gh * gw} tiles of the coarsest level ({gw}x{gh}{size}); raise the budget, "
        "encode with more levels (max_levels) or use mode 'topk'"
    )


def covers(shapes: list[tuple[int, int]], budget: int) -> bool:
    """Whether ``budget`` covers the coarsest of the pyramid's level ``shapes``: every quadtree selection starts from
    that cover."""
    gh, gw = shapes[-1]
    return budget >= gh * gw


def require_cover(shapes: list[tuple[int, int]], budget: int) -> None:
    """Raise ``BudgetError`` when ``budget`` cannot cover the coarsest level (:func:`covers`)."""
    if not covers(shapes, budget):
        gh, gw = shapes[-1]
        raise _cover_error(budget, gh, gw)


def check_cover(image_size: tuple[int, int], patch: int, max_levels: int, budget: int) -> None:
    """Raise the quadtree's ``BudgetError`` from the image size alone -- before decoding or encoding anything --
    when ``budget`` cannot cover the coarsest level of an (H, W) image (a 64 MP photo or a 1 x 1,000,000 strip
    on the default budget)."""
    from ..core.ops import grid_shape, num_levels

    h, w = image_size
    gh, gw = grid_shape(h, w, patch)
    for _ in range(num_levels(gh, gw, max_levels) - 1):
        gh, gw = -(-gh // 2), -(-gw // 2)
    if budget < gh * gw:
        raise _cover_error(budget, gh, gw, f" for a {w}x{h} image")


def _children(level: int, r: int, c: int, shapes: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
    gh, gw = shapes[level - 1]
    return [(level - 1, rr, cc) for rr in (2 * r, 2 * r + 1) for cc in (2 * c, 2 * c + 1) if rr < gh and cc < gw]


def _n_children(level: int, r: int, c: int, shapes: list[tuple[int, int]]) -> int:
    gh, gw = shapes[level - 1]
    return (min(2 * r + 2, gh) - 2 * r) * (min(2 * c + 2, gw) - 2 * c)


def quadtree_select(
    score: list[np.ndarray],
    need: list[np.ndarray],
    budget: int,
    area_exponent: float = 1.0,
    min_level: int = 0,
    prior: np.ndarray | None = None,
) -> list[tuple[int, int, int]]:
    """Greedy quadtree refinement.

    Args:
        score, need: per level (gh_l, gw_l) arrays, level 0 first.
        budget: maximum number of leaves.
        prior: per level, added to the log-priority of splitting a tile of that level (a learned scorer's level
            prior; ``None``: zeros).
    Returns:
        leaves as ``(level, row, col)``, disjoint and covering the image, ``len <= budget``.  Ties break by
        (level descending, row, col), so the result is deterministic.
    """
    shapes = [s.shape for s in score]
    top = len(shapes) - 1
    gh, gw = shapes[top]
    require_cover(shapes, budget)
    log2a = math.log(2.0) * area_exponent
    # log-priority = score + log(need) + level * area_exponent * ln 2 + prior[level], as nested lists for fast
    # scalar access (level 0 and levels at or below min_level are never split: no priorities needed there)
    prior = np.zeros(len(shapes)) if prior is None else np.asarray(prior, np.float64)
    prio: list[list[list[float]]] = [
        (score[lvl] + np.log(need[lvl]) + (lvl * log2a + float(prior[lvl]))).tolist() if lvl > min_level else []
        for lvl in range(len(shapes))
    ]
    leaves = {(top, r, c) for r in range(gh) for c in range(gw)}
    used = len(leaves)
    heap = [(-prio[top][r][c], -top, r, c) for (_, r, c) in leaves] if top > min_level else []
    heapq.heapify(heap)
    pop, push = heapq.heappop, heapq.heappush
    filtered = False
    while heap:
        if not filtered and budget - used < 3:
            # from now on only border tiles with fewer than 4 children can still be split: drop the rest at once
            # (only a tile on the last row or column of its children's level has fewer than 4: test that first)
            heap = [
                e
                for e in heap
                if (2 * e[2] + 2 > shapes[-e[1] - 1][0] or 2 * e[3] + 2 > shapes[-e[1] - 1][1])
                and _n_children(-e[1], e[2], e[3], shapes) - 1 <= budget - used
            ]
            heapq.heapify(heap)
            filtered = True
            continue
        _, neg_l, r, c = pop(heap)
        lvl = -neg_l
        kl = lvl - 1
        r2, c2 = 2 * r, 2 * c
        kh, kw = shapes[kl]
        kids: Sequence[tuple[int, int, int]]
        if r2 + 1 < kh and c2 + 1 < kw:  # an interior tile: four children (the common case, spelled out)
            kids = ((kl, r2, c2), (kl, r2, c2 + 1), (kl, r2 + 1, c2), (kl, r2 + 1, c2 + 1))
        else:
            kids = _children(lvl, r, c, shapes)
        if used + len(kids) - 1 > budget:
            continue
        leaves.remove((lvl, r, c))
        leaves.update(kids)
        used += len(kids) - 1
        if kl > min_level:
            pk = prio[kl]
            for _, kr, kc in kids:
                push(heap, (-pk[kr][kc], -kl, kr, kc))
    return sorted(leaves, key=_leaf_order)


def _leaf_order(t: tuple[int, int, int]) -> tuple[int, int, int]:
    return -t[0], t[1], t[2]
