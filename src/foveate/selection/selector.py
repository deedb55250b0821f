"""``select``: the light step.  Score the texture for a query, spend the token budget, cut the tokens.

Three pyramid modes (see ``SelectConfig``), and ``uniform`` (the whole image resized to fit the budget):

* ``quadtree`` -- start from the coarsest level's tiles (they cover the image) and repeatedly split the leaf
  with the highest ``relevance * need * (2**level) ** area_exponent`` into its children, while the budget
  allows.  Leaves are disjoint and cover the image; the token count never exceeds the budget
  (:mod:`.quadtree`).
* ``topk`` -- the seeds' cascade: rank the coarsest level, expand the survivors' descendants at the next stage
  level, ..., keep the best k at level 0; optionally plus a gist (every tile of the coarsest level)
  (:mod:`.topk`).
* ``auto`` (the default) -- the quadtree, or the top-k layout where a learned text term expects the answer to be
  more legible with it (:mod:`.auto`).

No pixel work happens here except the final cut of P x P patches from the pixel pyramid.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..core.config import SelectConfig, replace_config
from ..core.errors import QueryError
from ..core.texture import Texture
from ..query.base import LikelyLines
from ..query.query import MAX_QUERY_CHARS, Query
from ..query.scorer import Scorer, default_scorer, resolve_scorer
from ..query.terms import QUERY_TERMS, query_maps
from ..weights.weights import WeightsSpec
from .auto import answer_spans, choose, tied
from .floor import prefer_uniform
from .quadtree import covers, quadtree_select, require_cover
from .selection import Selection
from .topk import lines_first, topk_select, topk_split
from .uniform import cut_uniform, uniform_grid

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
    lines: LikelyLines | None = None  # where the answer probably is (the learned text term's lines)


def score_texture(texture: Texture, query: Query, scorer: Scorer | None = None) -> Scores:
    """Evaluate the scorer (default: the package's default weights) on every tile of every level for ``query``."""
    feats, offsets = texture.flat_features()
    scorer = scorer or default_scorer(texture.channels, feats.device)
    qm = query_maps(texture, query, scorer.weights)
    flat_q = qm.flat(texture, feats.device)
    score, need, bound = scorer.evaluate(feats, flat_q, qm.names, memo=texture.derived)
    shapes = texture.level_shapes

    def per_level(a: np.ndarray) -> list[np.ndarray]:
        return [a[offsets[i] : offsets[i + 1]].reshape(shapes[i]) for i in range(len(shapes))]

    return Scores(
        per_level(score),
        per_level(need),
        per_level(bound),
        list(qm.notes),
        feats,
        flat_q,
        list(qm.names),
        offsets,
        qm.lines,
    )


# ----------------------------------------------------------------------------------------------------------
# Token cut and geometry


def tile_geometry(
    levels: np.ndarray,
    rows: np.ndarray,
    cols: np.ndarray,
    image_size: tuple[int, int],
    patch: int,
    grid0: tuple[int, int],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Boxes (K, 4) in source pixels, normalised centres (K, 2), level-0 grid spans (K, 4)."""
    h, w = image_size
    f = 1 << levels.astype(np.int64)
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


def resolve_select_config(
    config: SelectConfig | None, budget: int | None, mode: str | None, overrides: dict[str, Any]
) -> SelectConfig:
    cfg = config or SelectConfig()
    changes = dict(overrides)
    if budget is not None:
        changes["budget"] = budget
    if mode is not None:
        changes["mode"] = mode
    out: SelectConfig = replace_config(cfg, changes)
    return out


def select(
    texture: Texture,
    query: Any = None,
    budget: int | None = None,
    *,
    mode: str | None = None,
    config: SelectConfig | None = None,
    scorer: Scorer | None = None,
    weights: WeightsSpec = None,
    explain: bool = False,
    **overrides: Any,
) -> Selection:
    """Pick tokens for one query from an encoded texture.

    Args:
        texture: from :func:`foveate.encode` or :meth:`Texture.load`.
        query: a string, a dict (``text``, ``points``, ``point_labels``, ``boxes``), a :class:`Query` or None.
        budget: tokens (default 273).  Above what the image can use, the result is the full-resolution cover
            (quadtree) or every level-0 tile (topk) -- never more than the budget.
        mode: ``"quadtree"``, ``"topk"`` or ``"uniform"``; other ``SelectConfig`` fields as keyword overrides.
        weights: relevance weights: ``None``/``"default"`` (the package's trained weights), ``"handset"``, a
            weights file from ``foveate train`` or a :class:`foveate.weights.Weights`.
        scorer: an explicit :class:`Scorer` (overrides ``weights``).
        explain: record which channels and query terms drove the chosen tiles (``Selection.explain``).
    """
    if not isinstance(texture, Texture):
        raise QueryError(
            f"select needs a Texture as its first argument, got {type(texture).__name__}: encode the "
            "image first (foveate.encode(image)), or use FoveatePredictor.set_image"
        )
    cfg = resolve_select_config(config, budget, mode, overrides)
    q = Query.coerce(query)
    q.validate(texture.image_size)
    notes: list[str] = []
    if q.text is not None and len(q.text) > MAX_QUERY_CHARS:
        notes.append(f"query text truncated from {len(q.text)} to {MAX_QUERY_CHARS} characters")
        q = dataclasses.replace(q, text=q.text[:MAX_QUERY_CHARS])
    t0 = time.perf_counter()
    scorer = resolve_scorer(weights, scorer, texture.channels, texture.device)
    sc = score_texture(texture, q, scorer)
    notes.extend(sc.notes)
    t1 = time.perf_counter()
    shapes = texture.level_shapes
    n_levels = len(shapes)
    layout = "uniform" if cfg.mode == "uniform" else "pyramid"
    foveated = cfg.mode in ("quadtree", "auto")
    # the gate is asked before the layout is chosen (its answer does not depend on the tiles), and not at a budget
    # that reaches full resolution (nothing beats it), for a query with points or boxes (the caller said where to
    # look: the floor never overrides it), nor for a query the semantic channels answer (the gate was trained without
    # them)
    if cfg.mode == "quadtree":
        require_cover(shapes, cfg.budget)  # a budget the quadtree cannot start from is an error, floor or not
    if (
        foveated
        and cfg.floor == "auto"
        and cfg.budget < shapes[0][0] * shapes[0][1]
        and not q.has_prompt
        and "semantic" not in sc.qnames
    ):
        take, margin = prefer_uniform(texture, q, scorer.floor, sc.lines, cfg.budget)
        if take:
            layout = "uniform"
            notes.append(
                f"uniform floor: at {cfg.budget} tokens the learned gate expects the whole image "
                f"resized to fit the budget to beat a foveated selection here (margin {margin:.2f}); "
                "floor='off' always foveates"
            )
    mode = cfg.mode
    if layout == "pyramid":
        candidates = {}  # name -> tiles, made on demand (auto may never need the second)
        if foveated and covers(shapes, cfg.budget):
            candidates["quadtree"] = lambda: quadtree_select(
                sc.score, sc.need, cfg.budget, cfg.area_exponent, cfg.min_level, prior=scorer.prior(n_levels)
            )
        lines = sc.lines if mode == "auto" else None  # what auto weighs the layouts by
        if mode == "topk" or (mode == "auto" and (not candidates or lines is not None)):
            gist_tiles, k = topk_split(shapes, cfg.budget, cfg.gist)
            candidates["topk"] = lambda: gist_tiles + _topk_tiles(sc, cfg, n_levels, k, texture.patch_size)
        mode, tiles, expected = choose(candidates, shapes[0], texture.patch_size, lines)
        if len(expected) > 1:
            notes.append(
                f"auto: {mode} layout; expected legible answer (the likely lines and the lines that continue them, "
                "by probability) "
                + ", ".join(f"{v:.2f} with {n}" for n, v in expected.items())
                + (
                    f"; a tie, and {mode} makes at least as much of the page's print legible"
                    if tied(expected.values())
                    else ""
                )
            )
        if mode == "topk" and cfg.gist and not gist_tiles and n_levels > 1:
            gh, gw = shapes[-1]
            notes.append(f"no gist: the coarsest level's {gh * gw} tiles do not fit in budget {cfg.budget}")
        gist = np.arange(len(tiles)) < (len(gist_tiles) if mode == "topk" else 0)
    t2 = time.perf_counter()
    if layout == "uniform":
        parts = _uniform_parts(texture, sc, cfg)
    else:
        parts = _pyramid_parts(texture, sc, cfg, tiles, gist)
    t3 = time.perf_counter()
    if layout == "pyramid" and len(parts["levels"]) < cfg.budget:
        full = shapes[0][0] * shapes[0][1]
        if mode == "topk" and k >= full:
            notes.append(f"budget {cfg.budget} exceeds the image's {full} level-0 tiles: all of them are selected")
        elif mode == "quadtree" and all(lvl <= cfg.min_level for lvl, _, _ in tiles):
            notes.append(f"budget {cfg.budget} exceeds what the image can use: full resolution in {len(tiles)} tokens")
    explained = None
    if explain:
        flat_rows = torch.tensor(
            [
                sc.offsets[lvl] + r * shapes[lvl][1] + c
                for lvl, r, c in zip(parts["levels"].tolist(), parts["rows"].tolist(), parts["cols"].tolist())
            ]
            if layout == "pyramid"
            else [],
            dtype=torch.int64,
            device=sc.flat_feats.device,
        )
        with torch.inference_mode():
            explained = scorer.explain(sc.flat_feats, sc.flat_q, sc.qnames, flat_rows) if len(flat_rows) else {}
    sel = Selection(
        **parts,
        relevance=sc.score[0].astype(np.float32),
        image_size=texture.image_size,
        patch_size=texture.patch_size,
        num_levels=n_levels,
        budget=cfg.budget,
        mode=mode,
        query=q,
        texture_id=texture.id,
        notes=notes,
        explain=explained,
        layout=layout,
        timings_ms={
            "score": (t1 - t0) * 1000,
            "select": (t2 - t1) * 1000,
            "cut": (t3 - t2) * 1000,
            "total": (t3 - t0) * 1000,
        },
    )
    if layout != "uniform" and mode == "topk" and not sel.gist.any():
        unsent = float((sel.level_map() < 0).mean())
        if unsent > 0:  # said, so the gaps in the mosaic are not taken for dark content
            sel.notes.append(
                f"top-k without gist: {100 * unsent:.0f}% of the image gets no token "
                "(grey in the mosaic, dimmed in the overlay); gist=True adds the whole image at the coarsest level"
            )
    if explain:
        sel.evidence = _evidence(texture, q, sc.qnames, sel, scorer)
    return sel


def _topk_tiles(sc: Scores, cfg: SelectConfig, n_levels: int, k: int, patch: int) -> list[tuple[int, int, int]]:
    """The top-k cascade's ``k`` level-0 tiles (stage levels clamped to the texture's), the likely answer lines
    completed first when the learned text term gives them (:func:`.topk.lines_first`)."""
    stage_levels = tuple(sorted({min(lvl, n_levels - 1) for lvl in cfg.topk_levels}, reverse=True))
    cands = cfg.topk_candidates
    if cands is not None and len(stage_levels) != len(cfg.topk_levels):
        cands = cands[len(cfg.topk_levels) - len(stage_levels) :]  # coarse stages collapsed by clamping
    ranked = topk_select(sc.score, k, stage_levels, cands, rank=sc.bound)
    if sc.lines is None:
        return ranked
    return lines_first(ranked, sc.score[0], *answer_spans(sc.lines, sc.score[0].shape, patch), k)


def _pyramid_parts(
    texture: Texture, sc: Scores, cfg: SelectConfig, tiles: list[Any], gist: np.ndarray
) -> dict[str, Any]:
    """The Selection arrays of pyramid tiles ``(level, row, col)``."""
    arr = np.array(tiles, dtype=np.int64).reshape(-1, 3)
    levels, rows, cols = arr[:, 0], arr[:, 1], arr[:, 2]
    scores = np.empty(len(levels), np.float32)
    for lvl in np.unique(levels):
        at = levels == lvl
        scores[at] = sc.score[int(lvl)][rows[at], cols[at]]
    boxes, centers, grid = tile_geometry(
        levels, rows, cols, texture.image_size, texture.patch_size, texture.level_shapes[0]
    )
    patches = cut_tokens(texture, levels, rows, cols) if cfg.cut else None
    return dict(
        levels=levels,
        rows=rows,
        cols=cols,
        scores=scores,
        boxes=boxes,
        centers=centers,
        grid=grid,
        gist=gist,
        patches=patches,
    )


def _uniform_parts(texture: Texture, sc: Scores, cfg: SelectConfig) -> dict[str, Any]:
    """The Selection arrays of the uniform layout: the image resized by s to fit the budget, cut in P x P tiles.

    ``levels`` holds the finest pyramid level whose scale is at most s (the tiles' scores and level map read it);
    ``scales`` holds s itself."""
    h, w = texture.image_size
    p = texture.patch_size
    fboxes, s, (ny, nx) = uniform_grid(texture.image_size, p, cfg.budget)
    boxes = np.rint(fboxes).astype(np.int64)
    k = len(boxes)
    rows, cols = np.divmod(np.arange(k, dtype=np.int64), nx)
    lvl = int(min(math.floor(math.log2(s) + 1e-9), len(texture.level_shapes) - 1))
    gh, gw = texture.level_shapes[0]
    grid = np.stack(
        [
            boxes[:, 1] // p,
            boxes[:, 0] // p,
            np.minimum(-(-boxes[:, 3] // p), gh),
            np.minimum(-(-boxes[:, 2] // p), gw),
        ],
        -1,
    ).astype(np.int64)
    f = 1 << lvl
    score_l = sc.score[lvl]
    cy = np.minimum(((boxes[:, 1] + boxes[:, 3]) // 2) // (p * f), score_l.shape[0] - 1)
    cx = np.minimum(((boxes[:, 0] + boxes[:, 2]) // 2) // (p * f), score_l.shape[1] - 1)
    centers = np.stack([(boxes[:, 0] + boxes[:, 2]) / 2.0 / w, (boxes[:, 1] + boxes[:, 3]) / 2.0 / h], -1)
    patches = None
    if cfg.cut:  # the same tiles for every query at this budget: cut once per texture (a resize of the whole image)
        cached = texture.derived(
            ("uniform", s, ny, nx),
            lambda: torch.from_numpy(cut_uniform(texture.image, s, p, (ny, nx))).permute(0, 3, 1, 2),
        )
        patches = cached.clone()
    return dict(
        levels=np.full(k, lvl, np.int64),
        rows=rows,
        cols=cols,
        scores=score_l[cy, cx].astype(np.float32),
        boxes=boxes,
        centers=centers.astype(np.float32),
        grid=grid,
        gist=np.zeros(k, bool),
        patches=patches,
        scales=np.full(k, s, np.float64),
    )


def _evidence(
    texture: Texture, query: Query, qnames: list[str], sel: Selection, scorer: Scorer
) -> list[dict[str, Any]]:
    """Each query term's evidence (e.g. matched OCR lines), with the selected levels over each item's box:
    ``levels`` = [finest, coarsest] selected level on the level-0 tiles the box touches (-1: not covered)."""
    items = []
    level_map = sel.level_map()
    p = texture.patch_size
    for name in qnames:
        fn = QUERY_TERMS[name].evidence
        found = () if fn is None else fn(texture, query, scorer.weights)
        for item in found:
            if "box" in item:
                x0, y0, x1, y1 = item["box"]
                under = level_map[
                    int(y0) // p : max(int(y1 - 1) // p + 1, int(y0) // p + 1),
                    int(x0) // p : max(int(x1 - 1) // p + 1, int(x0) // p + 1),
                ]
                if under.size:
                    item = {**item, "levels": [int(under.min()), int(under.max())]}
            items.append(item)
    return items
