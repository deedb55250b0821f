"""Where a text question asked before spends its ``select``: each part timed alone on the bundled page (1024 px, 40
OCR lines, the shipped weights, 273 tokens), median ms over the 16 questions of ``foveate bench``, three passes
(docs/lab/journal.md, "A text question asked before under 2 ms").

    python docs/lab/scripts/select_parts.py
"""

from __future__ import annotations

import time

import numpy as np


def main() -> None:
    from foveate import encode
    from foveate.bench.encode import TEXT_QUERIES, default_images
    from foveate.query.query import Query
    from foveate.selection import selector as sel
    from foveate.selection.auto import answer_spans, finest_levels, legible_answer
    from foveate.selection.quadtree import quadtree_select
    from foveate.selection.topk import lines_first, topk_select, topk_split

    tex = encode(dict(default_images())["page 1024x1024"], device="cpu")
    for q in TEXT_QUERIES:  # every question embedded and its map cached, as for a question asked before
        sel.select(tex, q)
    cfg = sel.resolve_select_config(None, None, None, {})
    scorer = sel.resolve_scorer(None, None, tex.channels, tex.device)
    shapes, n = tex.level_shapes, len(tex.level_shapes)
    scores = {q: sel.score_texture(tex, Query.coerce(q), scorer) for q in TEXT_QUERIES}
    _, k = topk_split(shapes, cfg.budget, cfg.gist)
    stages = tuple(sorted({min(lvl, n - 1) for lvl in cfg.topk_levels}, reverse=True))

    def quad(q: str) -> list[tuple[int, int, int]]:
        sc = scores[q]
        return quadtree_select(sc.score, sc.need, cfg.budget, cfg.area_exponent, cfg.min_level, prior=scorer.prior(n))

    def cascade(q: str) -> list[tuple[int, int, int]]:
        return topk_select(scores[q].score, k, stages, cfg.topk_candidates, rank=scores[q].bound)

    tiles = {q: quad(q) for q in TEXT_QUERIES}
    ranked = {q: cascade(q) for q in TEXT_QUERIES}
    spans = {q: answer_spans(scores[q].lines, shapes[0], tex.patch_size) for q in TEXT_QUERIES}
    parts = {
        "select, whole": lambda q: sel.select(tex, q),
        "scoring (score_texture)": lambda q: sel.score_texture(tex, Query.coerce(q), scorer),
        "floor gate": lambda q: sel.prefer_uniform(tex, Query.coerce(q), scorer.floor, scores[q].lines, cfg.budget),
        "quadtree": quad,
        "top-k with the lines completed (_topk_tiles)": lambda q: sel._topk_tiles(scores[q], cfg, n, k, tex.patch_size),
        "  of which the cascade": cascade,
        "  of which lines_first": lambda q: lines_first(ranked[q], scores[q].score[0], *spans[q], k),
        "one layout's expected legible answer": lambda q: legible_answer(
            tiles[q], shapes[0], tex.patch_size, scores[q].lines
        ),
        "  of which finest_levels": lambda q: finest_levels(tiles[q], shapes[0]),
        "the cut and geometry (_pyramid_parts)": lambda q: sel._pyramid_parts(
            tex, scores[q], cfg, tiles[q], np.zeros(len(tiles[q]), bool)
        ),
    }
    for name, fn in parts.items():
        ts = []
        for _ in range(3):
            for q in TEXT_QUERIES:
                t0 = time.perf_counter()
                fn(q)
                ts.append((time.perf_counter() - t0) * 1000.0)
        print(f"{name:48s} {np.median(ts):6.3f} ms")


if __name__ == "__main__":
    main()
