"""``select``: the light step.  Score the texture for a query, spend the token budget, cut the tokens.

Two modes (see ``SelectConfig``):

* ``quadtree`` -- start from the coarsest level's tiles (they cover the image) and repeatedly split the leaf
  with the highest ``relevance * need * (2**level) ** area_exponent`` into its children, while the budget
  allows.  Leaves are disjoint and cover the image; the token count never exceeds the budget.
* ``topk`` -- the seeds' cascade: rank the coarsest level, expand the survivors' descendants at the next stage
  level, ..., keep the best k at level 0; optionally plus a gist (every tile of the coarsest level).

No pixel work happens here except the final cut of P x P patches from the pixel pyramid.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from .core.config import SelectConfig, replace_config
from .core.errors import BudgetError
from .core.texture import Texture
from .query.query import MAX_QUERY_CHARS, Query
from .query.scorer import Scorer, default_scorer
from .query.terms import QUERY_TERMS, query_maps

#: selection.json schema version (see docs/selection-schema.md)
SCHEMA_VERSION = 1


@dataclass
class Selection:
    """The tokens chosen for one (texture, query, budget).  Arrays are indexed by token, shape (K, ...).

    Attributes:
        levels, rows, cols: (K,) int64: each token is tile (rows[i], cols[i]) of pyramid level levels[i].
        scores: (K,) float32: the scorer's score (log-relevance) of each token's tile.
        boxes: (K, 4) int64: ``x0, y0, x1, y1`` in source pixels, clipped to the image (x1, y1 exclusive).
        centers: (K, 2) float32: box centre ``(cx, cy)`` normalised to [0, 1] by the image width and height.
        grid: (K, 4) int64: the level-0 tiles the token spans, ``r0, c0, r1, c1`` (r1, c1 exclusive).
        gist: (K,) bool: the token belongs to the top-k mode's gist.
        patches: (K, 3, P, P) uint8 torch tensor of pixels (``None`` when ``cut=False``).
        relevance: (gh, gw) float32: the level-0 score map (for heat maps).
    """

    levels: np.ndarray
    rows: np.ndarray
    cols: np.ndarray
    scores: np.ndarray
    boxes: np.ndarray
    centers: np.ndarray
    grid: np.ndarray
    gist: np.ndarray
    patches: torch.Tensor | None
    relevance: np.ndarray
    image_size: tuple[int, int]
    patch_size: int
    num_levels: int
    budget: int
    mode: str
    query: Query
    texture_id: str
    timings_ms: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    explain: dict[str, float] | None = None
    evidence: list[dict] = field(default_factory=list)  # with explain: what drove the query terms (OCR lines, ...)

    def __len__(self) -> int:
        return int(self.levels.shape[0])

    @property
    def num_tiles(self) -> int:
        gh, gw = self.relevance.shape
        return gh * gw

    def level_counts(self) -> dict[int, int]:
        vals, counts = np.unique(self.levels, return_counts=True)
        return {int(v): int(c) for v, c in zip(vals, counts)}

    def level_map(self) -> np.ndarray:
        """(gh, gw) int64: the finest selected level covering each level-0 tile, -1 where nothing is selected.

        Painted per level, not per token: coarse levels first, finer ones overwrite (the minimum level)."""
        gh, gw = self.relevance.shape
        out = np.full((gh, gw), -1, np.int64)
        for lvl in np.unique(self.levels)[::-1]:
            f = 1 << int(lvl)
            pick = self.levels == lvl
            rows, cols = self.rows[pick], self.cols[pick]
            hit = np.zeros((max(-(-gh // f), int(rows.max()) + 1), max(-(-gw // f), int(cols.max()) + 1)), bool)
            hit[rows, cols] = True
            out[np.repeat(np.repeat(hit, f, axis=0), f, axis=1)[:gh, :gw]] = lvl
        return out

    def to_dict(self) -> dict[str, Any]:
        """The ``selection.json`` document (schema in docs/selection-schema.md)."""
        h, w = self.image_size
        return {
            "schema_version": SCHEMA_VERSION,
            "texture_id": self.texture_id,
            "image": {"width": w, "height": h},
            "patch_size": self.patch_size,
            "num_levels": self.num_levels,
            "mode": self.mode,
            "budget": self.budget,
            "num_tokens": len(self),
            "num_tiles_full": self.num_tiles,
            "query": self.query.to_dict(),
            "level_counts": {str(k): v for k, v in self.level_counts().items()},
            "timings_ms": {k: round(v, 3) for k, v in self.timings_ms.items()},
            "notes": list(self.notes),
            "explain": self.explain,
            "evidence": self.evidence,
            # built from .tolist() columns: per-element NumPy indexing made this ~5x slower (it is on the
            # HTTP service's select path); values are the same Python ints, floats and bools
            "tokens": [
                {"level": lvl, "row": r, "col": c, "box": box, "center": [round(x, 6), round(y, 6)], "grid": grid,
                 "score": round(score, 5), "gist": gist}
                for lvl, r, c, box, (x, y), grid, score, gist in zip(
                    self.levels.tolist(), self.rows.tolist(), self.cols.tolist(), self.boxes.tolist(),
                    self.centers.astype(np.float64).tolist(), self.grid.tolist(),
                    self.scores.astype(np.float64).tolist(), self.gist.tolist())
            ],
        }

    def tensors(self) -> dict[str, torch.Tensor]:
        """What ``tokens.safetensors`` holds: patches, boxes, levels, positions, scores."""
        out = {
            "boxes": torch.from_numpy(self.boxes.astype(np.int64)),
            "levels": torch.from_numpy(self.levels.astype(np.int64)),
            "rows": torch.from_numpy(self.rows.astype(np.int64)),
            "cols": torch.from_numpy(self.cols.astype(np.int64)),
            "centers": torch.from_numpy(self.centers.astype(np.float32)),
            "grid": torch.from_numpy(self.grid.astype(np.int64)),
            "scores": torch.from_numpy(self.scores.astype(np.float32)),
            "gist": torch.from_numpy(self.gist.astype(np.uint8)),
        }
        if self.patches is not None:
            out["patches"] = self.patches.contiguous()
        return out


# ----------------------------------------------------------------------------------------------------------
# Scoring all levels at once


@dataclass
class Scores:
    """Per-level score and need arrays for one query (CPU NumPy, small: 5,456 tiles for a 1024^2 image)."""

    score: list[np.ndarray]  # per level (gh_l, gw_l) float32
    need: list[np.ndarray]
    bound: list[np.ndarray]  # optimistic best level-0 score under each tile (top-k pruning)
    notes: list[str]
    flat_feats: torch.Tensor
    flat_q: torch.Tensor | None
    qnames: list[str]
    offsets: list[int]


def score_texture(texture: Texture, query: Query, scorer: Scorer | None = None) -> Scores:
    """Evaluate the scorer on every tile of every level for ``query``."""
    feats, offsets = texture.flat_features()
    scorer = scorer or default_scorer(texture.channels, feats.device)
    qm = query_maps(texture, query)
    flat_q = qm.flat(texture, feats.device)
    score, need, bound = scorer.evaluate(feats, flat_q, qm.names)
    shapes = texture.level_shapes

    def per_level(a: np.ndarray) -> list[np.ndarray]:
        return [a[offsets[i] : offsets[i + 1]].reshape(shapes[i]) for i in range(len(shapes))]

    return Scores(per_level(score), per_level(need), per_level(bound), list(qm.notes), feats, flat_q,
                  list(qm.names), offsets)


# ----------------------------------------------------------------------------------------------------------
# The two selection strategies (pure: arrays in, tile lists out)


def _children(level: int, r: int, c: int, shapes: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
    gh, gw = shapes[level - 1]
    return [(level - 1, rr, cc) for rr in (2 * r, 2 * r + 1) for cc in (2 * c, 2 * c + 1) if rr < gh and cc < gw]


def quadtree_select(score: list[np.ndarray], need: list[np.ndarray], budget: int, area_exponent: float = 1.0,
                    min_level: int = 0) -> list[tuple[int, int, int]]:
    """Greedy quadtree refinement.

    Args:
        score, need: per level (gh_l, gw_l) arrays, level 0 first.
        budget: maximum number of leaves.
    Returns:
        leaves as ``(level, row, col)``, disjoint and covering the image, ``len <= budget``.  Ties break by
        (level descending, row, col), so the result is deterministic.
    """
    shapes = [s.shape for s in score]
    top = len(shapes) - 1
    gh, gw = shapes[top]
    if budget < gh * gw:
        raise BudgetError(
            f"budget {budget} is below the {gh * gw} tiles of the coarsest level ({gw}x{gh}); raise the budget, "
            "encode with more levels (max_levels) or use mode 'topk'")
    log2a = math.log(2.0) * area_exponent
    # log-priority = score + log(need) + level * area_exponent * ln 2, as nested lists for fast scalar access
    # (level 0 and levels at or below min_level are never split: no priorities needed there)
    prio = [(score[lvl] + np.log(need[lvl]) + lvl * log2a).tolist() if lvl > min_level else None
            for lvl in range(len(shapes))]
    leaves = {(top, r, c) for r in range(gh) for c in range(gw)}
    used = len(leaves)
    heap = [(-prio[top][r][c], -top, r, c) for (_, r, c) in leaves] if top > min_level else []
    heapq.heapify(heap)
    filtered = False
    while heap:
        if not filtered and budget - used < 3:
            # from now on only border tiles with fewer than 4 children can still be split: drop the rest at once
            heap = [e for e in heap if len(_children(-e[1], e[2], e[3], shapes)) - 1 <= budget - used]
            heapq.heapify(heap)
            filtered = True
            continue
        _, neg_l, r, c = heapq.heappop(heap)
        lvl = -neg_l
        kids = _children(lvl, r, c, shapes)
        if used + len(kids) - 1 > budget:
            continue
        leaves.remove((lvl, r, c))
        leaves.update(kids)
        used += len(kids) - 1
        if lvl - 1 > min_level:
            for k in kids:
                heapq.heappush(heap, (-prio[k[0]][k[1]][k[2]], -k[0], k[1], k[2]))
    return sorted(leaves, key=lambda t: (-t[0], t[1], t[2]))


def _descendant_count(level: int, r: int, c: int, target: int, shapes: list[tuple[int, int]]) -> int:
    f = 1 << (level - target)
    gh, gw = shapes[target]
    return max(0, min((r + 1) * f, gh) - r * f) * max(0, min((c + 1) * f, gw) - c * f)


def _rank(values: np.ndarray) -> np.ndarray:
    """Indices sorting ``values`` descending, ties by index (deterministic)."""
    return np.argsort(-values, kind="stable")


def topk_select(score: list[np.ndarray], k: int, stage_levels: tuple[int, ...],
                candidates: tuple[int | None, ...] | None,
                rank: list[np.ndarray] | None = None) -> list[tuple[int, int, int]]:
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
        kids = [(rr, cc) for r, c in keep for rr in range(r * f, min((r + 1) * f, gh2))
                for cc in range(c * f, min((c + 1) * f, gw2))]
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


# ----------------------------------------------------------------------------------------------------------
# Token cut and geometry


def tile_geometry(levels: np.ndarray, rows: np.ndarray, cols: np.ndarray, image_size: tuple[int, int],
                  patch: int, grid0: tuple[int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Boxes (K, 4) in source pixels, normalised centres (K, 2), level-0 grid spans (K, 4)."""
    h, w = image_size
    f = (1 << levels.astype(np.int64))
    side = patch * f
    x0, y0 = cols * side, rows * side
    x1, y1 = np.minimum(x0 + side, w), np.minimum(y0 + side, h)
    boxes = np.stack([x0, y0, x1, y1], -1).astype(np.int64)
    centers = np.stack([(x0 + x1) / 2.0 / w, (y0 + y1) / 2.0 / h], -1).astype(np.float32)
    gh, gw = grid0
    grid = np.stack([rows * f, cols * f, np.minimum((rows + 1) * f, gh), np.minimum((cols + 1) * f, gw)], -1)
    return boxes, centers, grid.astype(np.int64)


def cut_tokens(texture: Texture, levels: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> torch.Tensor:
    """The P x P pixels of each tile from its pyramid level: (K, 3, P, P) uint8 (channels-first, as VLMs take)."""
    p = texture.patch_size
    pyr = texture.pixel_levels()
    out = np.empty((len(levels), p, p, 3), np.uint8)
    for lvl in np.unique(levels):
        idx = np.nonzero(levels == lvl)[0]
        img = pyr[int(lvl)]
        gh, gw = img.shape[0] // p, img.shape[1] // p
        tiles = img.reshape(gh, p, gw, p, 3).transpose(0, 2, 1, 3, 4)  # a view: (gh, gw, P, P, 3)
        out[idx] = tiles[rows[idx], cols[idx]]
    return torch.from_numpy(out).permute(0, 3, 1, 2)


# ----------------------------------------------------------------------------------------------------------
# The public entry point


def resolve_select_config(config: SelectConfig | None, budget: int | None, mode: str | None,
                          overrides: dict[str, Any]) -> SelectConfig:
    cfg = config or SelectConfig()
    changes = dict(overrides)
    if budget is not None:
        changes["budget"] = budget
    if mode is not None:
        changes["mode"] = mode
    return replace_config(cfg, changes)


def select(texture: Texture, query: Any = None, budget: int | None = None, *, mode: str | None = None,
           config: SelectConfig | None = None, scorer: Scorer | None = None, explain: bool = False,
           **overrides: Any) -> Selection:
    """Pick tokens for one query from an encoded texture.

    Args:
        texture: from :func:`foveate.encode` or :meth:`Texture.load`.
        query: a string, a dict (``text``, ``points``, ``point_labels``, ``boxes``), a :class:`Query` or None.
        budget: tokens (default 273).  Above what the image can use, the result is the full-resolution cover
            (quadtree) or every level-0 tile (topk) -- never more than the budget.
        mode: ``"quadtree"`` or ``"topk"``; other ``SelectConfig`` fields as keyword overrides.
        scorer: a trained :class:`Scorer` (default: the documented hand-set weights).
        explain: record which channels and query terms drove the chosen tiles (``Selection.explain``).
    """
    cfg = resolve_select_config(config, budget, mode, overrides)
    q = Query.coerce(query)
    q.validate(texture.image_size)
    notes: list[str] = []
    if q.text is not None and len(q.text) > MAX_QUERY_CHARS:
        notes.append(f"query text truncated from {len(q.text)} to {MAX_QUERY_CHARS} characters")
        q = dataclasses.replace(q, text=q.text[:MAX_QUERY_CHARS])
    t0 = time.perf_counter()
    sc = score_texture(texture, q, scorer)
    notes.extend(sc.notes)
    t1 = time.perf_counter()
    shapes = texture.level_shapes
    n_levels = len(shapes)
    if cfg.mode == "quadtree":
        tiles = quadtree_select(sc.score, sc.need, cfg.budget, cfg.area_exponent, cfg.min_level)
        gist = np.zeros(len(tiles), bool)
    else:
        stage_levels = tuple(sorted({min(lvl, n_levels - 1) for lvl in cfg.topk_levels}, reverse=True))
        cands = cfg.topk_candidates
        if cands is not None and len(stage_levels) != len(cfg.topk_levels):
            cands = cands[len(cfg.topk_levels) - len(stage_levels):]  # coarse stages collapsed by clamping
        gist_tiles, k = topk_split(shapes, cfg.budget, cfg.gist)
        if cfg.gist and not gist_tiles and n_levels > 1:
            gh, gw = shapes[-1]
            notes.append(f"no gist: the coarsest level's {gh * gw} tiles do not fit in budget {cfg.budget}")
        tiles = gist_tiles + topk_select(sc.score, k, stage_levels, cands, rank=sc.bound)
        gist = np.array([True] * len(gist_tiles) + [False] * k, bool)
    t2 = time.perf_counter()
    arr = np.array(tiles, dtype=np.int64).reshape(-1, 3)
    levels, rows, cols = arr[:, 0], arr[:, 1], arr[:, 2]
    scores = np.array([sc.score[lvl][r, c] for lvl, r, c in tiles], np.float32)
    boxes, centers, grid = tile_geometry(levels, rows, cols, texture.image_size, texture.patch_size, shapes[0])
    patches = cut_tokens(texture, levels, rows, cols) if cfg.cut else None
    t3 = time.perf_counter()
    if len(tiles) < cfg.budget:
        full = shapes[0][0] * shapes[0][1]
        if cfg.mode == "topk" and k >= full:
            notes.append(f"budget {cfg.budget} exceeds the image's {full} level-0 tiles: all of them are selected")
        elif cfg.mode == "quadtree" and all(lvl <= cfg.min_level for lvl, _, _ in tiles):
            notes.append(f"budget {cfg.budget} exceeds what the image can use: full resolution in {len(tiles)} tokens")
    explained = None
    if explain:
        flat_rows = torch.tensor([sc.offsets[lvl] + r * shapes[lvl][1] + c for lvl, r, c in tiles],
                                 device=sc.flat_feats.device)
        s = scorer or default_scorer(texture.channels, sc.flat_feats.device)
        with torch.inference_mode():
            explained = s.explain(sc.flat_feats, sc.flat_q, sc.qnames, flat_rows)
    sel = Selection(
        levels=levels, rows=rows, cols=cols, scores=scores, boxes=boxes, centers=centers, grid=grid, gist=gist,
        patches=patches, relevance=sc.score[0].astype(np.float32), image_size=texture.image_size,
        patch_size=texture.patch_size, num_levels=n_levels, budget=cfg.budget, mode=cfg.mode, query=q,
        texture_id=texture.id, notes=notes, explain=explained,
        timings_ms={"score": (t1 - t0) * 1000, "select": (t2 - t1) * 1000, "cut": (t3 - t2) * 1000,
                    "total": (t3 - t0) * 1000},
    )
    if explain:
        sel.evidence = _evidence(texture, q, sc.qnames, sel)
    return sel


def _evidence(texture: Texture, query: Query, qnames: list[str], sel: Selection) -> list[dict]:
    """Each query term's evidence (e.g. matched OCR lines), with the selected levels over each item's box:
    ``levels`` = [finest, coarsest] selected level on the level-0 tiles the box touches (-1: not covered)."""
    items = []
    level_map = sel.level_map()
    p = texture.patch_size
    for name in qnames:
        fn = QUERY_TERMS[name].evidence
        for item in fn(texture, query) if fn is not None else ():
            if "box" in item:
                x0, y0, x1, y1 = item["box"]
                under = level_map[int(y0) // p : max(int(y1 - 1) // p + 1, int(y0) // p + 1),
                                  int(x0) // p : max(int(x1 - 1) // p + 1, int(x0) // p + 1)]
                if under.size:
                    item = {**item, "levels": [int(under.min()), int(under.max())]}
            items.append(item)
    return items
