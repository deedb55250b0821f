"""The ``topk`` strategy (pure: per-level arrays in, tiles out): the seeds' coarse-to-fine cascade -- rank the
coarsest level, expand the survivors' descendants at the next stage level, ..., keep the best k at level 0 --
optionally plus a gist (every tile of the coarsest level); :func:`topk_split` is how a budget divides between
the two (shared with the evaluation's random and oracle baselines); :func:`lines_first` completes the likely answer
lines before the rest of the k tiles go by score."""

from __future__ import annotations

import numpy as np


def _descendant_counts(level: int, cells: np.ndarray, target: int, shapes: list[tuple[int, int]]) -> np.ndarray:
    """(N,) how many tiles of level ``target`` lie under each level-``level`` tile ``cells`` (N, 2) (fewer at the
    grid's bottom and right edges)."""
    f = 1 << (level - target)
    gh, gw = shapes[target]
    r, c = cells[:, 0], cells[:, 1]
    rows = np.clip(np.minimum((r + 1) * f, gh) - r * f, 0, None)
    cols = np.clip(np.minimum((c + 1) * f, gw) - c * f, 0, None)
    out: np.ndarray = rows * cols
    return out


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
        ranked = cand[_rank(rank[lvl][cand[:, 0], cand[:, 1]])]
        target = candidates[i]
        n_keep = len(ranked)
        if target is not None:  # the best tiles until they yield ``target`` candidates and k level-0 tiles
            enough = (np.cumsum(_descendant_counts(lvl, ranked, nxt, shapes)) >= target) & (
                np.cumsum(_descendant_counts(lvl, ranked, 0, shapes)) >= k
            )
            if enough.any():
                n_keep = int(np.argmax(enough)) + 1
        keep = ranked[:n_keep]
        f = 1 << (lvl - nxt)
        gh2, gw2 = shapes[nxt]
        step = np.arange(f)
        rows = np.broadcast_to((keep[:, 0:1] * f + step)[:, :, None], (len(keep), f, f))
        cols = np.broadcast_to((keep[:, 1:2] * f + step)[:, None, :], (len(keep), f, f))
        inside = (rows < gh2) & (cols < gw2)  # each kept tile's children, row by row, in the kept order
        cand = np.stack([rows[inside], cols[inside]], 1).astype(np.int64)
    vals = score[0][cand[:, 0], cand[:, 1]]
    # rank by score, ties by raster index so a pruned and an unpruned cascade agree
    raster = cand[:, 0] * shapes[0][1] + cand[:, 1]
    order = np.lexsort((raster, -vals))[:k]
    return [(0, r, c) for r, c in cand[order].tolist()]


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


def lines_first(
    ranked: list[tuple[int, int, int]],
    score0: np.ndarray,
    spans: np.ndarray,
    values: np.ndarray,
    k: int,
) -> list[tuple[int, int, int]]:
    """``k`` level-0 tiles that make whole spans sharp first, then follow the score.

    A line of print is legible only when every tile under it is sharp, so a plain top-k that ends half-way along the
    last line it reaches spent those tokens on nothing.  Here the spans (the tiles under each likely answer line) are
    taken greedily while they fit in ``k``, and the tokens left go to ``ranked`` (the cascade's tiles, best first) in
    its order.  Two greedy orders are tried -- most value per tile not yet taken (the classic greedy for a knapsack),
    then most value (which the first can miss: many cheap unlikely lines that leave no room for a long likely one)
    -- and the result worth most is kept, the cascade's own tiles included: worth is each span's value times the
    share of its tiles taken, so an unfinished line counts for part.

    Args:
        ranked: the top-k cascade's ``k`` level-0 tiles ``(0, row, col)``, best first.
        score0: the level-0 scores (gh, gw): the order of the result.
        spans: (N, 4) int64 ``(r0, r1, c0, c1)``, end-exclusive tile ranges of the lines, inside the grid.
        values: (N,) what making each span sharp is worth (the lines' probabilities of holding the answer).
        k: tiles to return (at most ``len(ranked)``).
    Returns:
        ``k`` tiles ``(0, row, col)`` in descending score order, ties by raster index (as :func:`topk_select`);
        exactly ``ranked`` where neither greedy is worth more.
    """
    gh, gw = score0.shape
    sp = np.asarray(spans, np.int64).reshape(-1, 4)
    value = np.asarray(values, np.float64).reshape(-1)
    area = (sp[:, 1] - sp[:, 0]) * (sp[:, 3] - sp[:, 2])

    def worth(mask: np.ndarray) -> float:
        return float((value * _inside(mask, sp) / np.maximum(area, 1)).sum())

    rk = np.array(ranked[:k], np.int64).reshape(-1, 3)
    plain = np.zeros((gh, gw), bool)
    plain[rk[:, 1], rk[:, 2]] = True
    union = np.zeros((gh, gw), bool)
    for r0, r1, c0, c1 in sp[area > 0]:
        union[r0:r1, c0:c1] = True
    # every span fits at once (the usual case at 273 tokens and above): both greedy orders would take them all
    greedy = (
        [union] if union.sum() <= k else [_greedy(sp, value, area, k, per_tile, (gh, gw)) for per_tile in (True, False)]
    )
    best, best_worth = None, worth(plain)
    for taken in greedy:
        used = int(taken.sum())
        if not used:
            continue
        rest = np.flatnonzero(~taken[rk[:, 1], rk[:, 2]])[: k - used]  # the cascade's best tiles not yet taken
        taken[rk[rest, 1], rk[rest, 2]] = True
        if (w := worth(taken)) > best_worth + 1e-12:
            best, best_worth = taken, w
    if best is None:
        return ranked[:k]
    rows, cols = np.nonzero(best)
    order = np.lexsort((rows * gw + cols, -score0[rows, cols]))
    return [(0, r, c) for r, c in zip(rows[order].tolist(), cols[order].tolist())]


def _inside(taken: np.ndarray, spans: np.ndarray) -> np.ndarray:
    """(N,) how many tiles of each span ``taken`` holds (2-D prefix sums)."""
    c = np.zeros((taken.shape[0] + 1, taken.shape[1] + 1), np.int64)
    c[1:, 1:] = taken.cumsum(0).cumsum(1)
    r0, r1, c0, c1 = spans.T
    out: np.ndarray = c[r1, c1] - c[r0, c1] - c[r1, c0] + c[r0, c0]
    return out


def _greedy(
    spans: np.ndarray, value: np.ndarray, area: np.ndarray, k: int, per_tile: bool, shape: tuple[int, int]
) -> np.ndarray:
    """(gh, gw) bool: spans taken whole, one at a time, the most valuable (per tile not yet taken, with
    ``per_tile``; the first on ties) of those that still fit in ``k``."""
    taken = np.zeros(shape, bool)
    open_ = area > 0
    used = 0
    while open_.any():
        new = area - _inside(taken, spans)
        open_ &= new > 0
        fits = open_ & (new <= k - used)
        if not fits.any():
            break
        worth = value / np.maximum(new, 1) if per_tile else value
        i = int(np.argmax(np.where(fits, worth, -np.inf)))
        r0, r1, c0, c1 = spans[i]
        taken[r0:r1, c0:c1] = True
        used += int(new[i])
        open_[i] = False
    return taken
