"""The ``topk`` strategy (pure: per-level arrays in, tiles out): the seeds' coarse-to-fine cascade -- rank the
coarsest level, expand the survivors' descendants at the next stage level, ..., keep the best k at level 0 --
optionally plus a gist (every tile of the coarsest level); :func:`topk_split` is how a budget divides between
the two (shared with the evaluation's random and oracle baselines)."""

from __future__ import annotations

import numpy as np


def _descendant_count(level: int, r: int, c: int, target: int, shapes: list[tuple[int, int]]) -> int:
    f = 1 << (level - target)
    gh, gw = shapes[target]
    return max(0, min((r + 1) * f, gh) - r * f) * max(0, min((c + 1) * f, gw) - c * f)


def _rank(values: np.ndarray) -> np.ndarray:
    """Indices sorting ``values`` descending, ties by index (deterministic)."""
    return np.argsort(-values, kind="stable")


def topk_select(
    score: list[np.ndarray],
    k: int,
    stage_levels: tuple[int, ...],
    candidates: tuple[int | None, ...] | None,
    rank: list[np.ndarray] | None = None,
) -> list[tuple[int, int, int]]:
    """Coarse-to-fine cascade ending with the best ``k`` level-0 tiles.

    Args:
        score: per level (gh_l, gw_l) arrays; level 0 decides the final k.
        rank: per level arrays that rank the coarse stages (default ``score``); ``select`` passes the
            scorer's optimistic bound, so a coarse tile is kept when its best descendant could make the cut.
        k: tiles to keep at level 0.
        stage_levels: strictly decreasing levels ending at 0 (already clamped to the texture).
        candidates: per transition, how many candidates the survivors should yield at the next stage's level
            (``None`` = keep all).  ``None`` for the whole tuple: 500 into intermediate levels, 4k into level 0.
    Returns:
        ``k`` tiles ``(0, row, col)`` in descending score order.  With no pruning this is exactly the plain
        top-k of the level-0 scores.
    """
    shapes = [s.shape for s in score]
    rank = score if rank is None else rank
    if candidates is None:
        candidates = tuple(500 if lvl > 0 else 4 * k for lvl in stage_levels[1:])
    top = stage_levels[0]
    gh, gw = shapes[top]
    cand = np.stack(np.meshgrid(np.arange(gh), np.arange(gw), indexing="ij"), -1).reshape(-1, 2)
    for i, lvl in enumerate(stage_levels[:-1]):
        nxt = stage_levels[i + 1]
        order = _rank(rank[lvl][cand[:, 0], cand[:, 1]])
        target = candidates[i]
        keep = []
        got = got0 = 0
        for j in order:
            r, c = int(cand[j, 0]), int(cand[j, 1])
            keep.append((r, c))
            got += _descendant_count(lvl, r, c, nxt, shapes)
            got0 += _descendant_count(lvl, r, c, 0, shapes)
            if target is not None and got >= target and got0 >= k:
                break
        f = 1 << (lvl - nxt)
        gh2, gw2 = shapes[nxt]
        kids = [
            (rr, cc)
            for r, c in keep
            for rr in range(r * f, min((r + 1) * f, gh2))
            for cc in range(c * f, min((c + 1) * f, gw2))
        ]
        cand = np.array(kids, dtype=np.int64).reshape(-1, 2)
    vals = score[0][cand[:, 0], cand[:, 1]]
    # rank by score, ties by raster index so a pruned and an unpruned cascade agree
    raster = cand[:, 0] * shapes[0][1] + cand[:, 1]
    order = np.lexsort((raster, -vals))[:k]
    return [(0, int(cand[j, 0]), int(cand[j, 1])) for j in order]


def gist_cover(shapes: list[tuple[int, int]], budget: int) -> list[tuple[int, int, int]]:
    """The top-k gist: every tile of the coarsest level, or ``[]`` when there is a single level or those
    tiles leave no room for a level-0 token in ``budget``."""
    top = len(shapes) - 1
    gh, gw = shapes[top]
    if top == 0 or gh * gw >= budget:
        return []
    return [(top, r, c) for r in range(gh) for c in range(gw)]


def topk_split(shapes: list[tuple[int, int]], budget: int, gist: bool) -> tuple[list[tuple[int, int, int]], int]:
    """How top-k spends ``budget``: the gist tiles (:func:`gist_cover` when ``gist``) and ``k``, the level-0 tokens
    left (at most every level-0 tile).  Shared with the evaluation's random and oracle baselines, so they split a
    budget exactly as ``select`` does."""
    tiles = gist_cover(shapes, budget) if gist else []
    return tiles, min(budget - len(tiles), shapes[0][0] * shapes[0][1])
