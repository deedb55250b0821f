"""The ``auto`` mode: its legibility estimate against the evaluation's exact metric and ``Selection.level_map``, its
choice against both layouts computed separately, and its fallbacks; the top-k layout's completion of the likely
answer lines against a slow greedy written out with sets."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from foveate import SelectConfig, select
from foveate.eval.metrics import query_metrics
from foveate.query.base import LikelyLines
from foveate.query.query import Query
from foveate.query.scorer import resolve_scorer
from foveate.query.terms import query_maps
from foveate.selection.auto import answer_spans, choose, finest_levels, legible_answer, legible_share
from foveate.selection.selector import _topk_tiles, score_texture
from foveate.selection.topk import lines_first, topk_split
from foveate.weights import load_weights

QUESTIONS = ("What is the total?", "Who is the invoice addressed to?", "invoice number", "due date")


def _tiles(sel):
    return list(zip(sel.levels.tolist(), sel.rows.tolist(), sel.cols.tolist()))


@pytest.mark.parametrize("mode", ["quadtree", "topk"])
@pytest.mark.parametrize("budget", [30, 64, 273])
def test_finest_levels_equal_a_per_token_reference(page_texture, mode, budget):
    sel = select(page_texture, "What is the total?", budget, mode=mode, cut=False)
    ref = np.full(page_texture.level_shapes[0], -1, np.int64)
    for lvl, (r0, c0, r1, c1) in zip(sel.levels.tolist(), sel.grid.tolist()):  # each token's level-0 span
        span = ref[r0:r1, c0:c1]
        span[(span < 0) | (span > lvl)] = lvl
    assert np.array_equal(finest_levels(_tiles(sel), page_texture.level_shapes[0]), ref)


@pytest.mark.parametrize("mode", ["quadtree", "topk"])
def test_legible_share_equals_the_exact_metric(page_texture, mode):
    """Per box, the share on legible tiles equals the evaluation's legible coverage (exact area union of the tokens
    fine enough for the box's text height), boxes and heights drawn at random."""
    rng = np.random.default_rng(0)
    h, w = page_texture.image_size
    sel = select(page_texture, "due date", 144, mode=mode, cut=False)
    levels = finest_levels(_tiles(sel), page_texture.level_shapes[0])
    x0, y0 = rng.uniform(0, w - 40, 60), rng.uniform(0, h - 20, 60)
    boxes = np.stack([x0, y0, x0 + rng.uniform(3, 300, 60), y0 + rng.uniform(3, 60, 60)], 1)
    boxes[:, 2], boxes[:, 3] = np.minimum(boxes[:, 2], w), np.minimum(boxes[:, 3], h)
    heights = rng.uniform(4, 70, 60)
    got = legible_share(levels, page_texture.patch_size, boxes, heights)
    ref = [
        query_metrics(sel.boxes, None, b[None], sel.image_size, np.array([t]), token_scales=sel.scales).legible_coverage
        for b, t in zip(boxes, heights)
    ]
    np.testing.assert_allclose(got, ref, atol=1e-9)
    assert 0 < got.mean() < 1  # the draw holds legible and blurred boxes


def test_choose_weighs_the_likely_answer_then_the_pages_print():
    grid = (4, 4)

    def never():
        raise AssertionError("made a candidate that could not change the choice")

    coarse = [(2, 0, 0)]  # one 64 px tile: 12 px text is blurred
    fine = [(0, r, c) for r in range(4) for c in range(4)]
    assert choose({"quadtree": lambda: coarse, "topk": never}, grid, 16, None)[:2] == ("quadtree", coarse)
    boxes, heights = np.array([[0.0, 0.0, 16.0, 16.0], [32.0, 32.0, 64.0, 48.0]]), np.array([12.0, 12.0])
    likely = LikelyLines(boxes, heights, np.array([0.9, 0.0]))
    name, tiles, got = choose({"quadtree": lambda: coarse, "topk": lambda: coarse + fine}, grid, 16, likely)
    assert (name, tiles) == ("topk", coarse + fine) and got == pytest.approx({"quadtree": 0.0, "topk": 0.9})
    first_only = [(0, 0, 0)]  # the likely line sharp, the other line blurred
    name, _, got = choose({"quadtree": lambda: first_only, "topk": lambda: fine}, grid, 16, likely)
    assert name == "topk" and got["quadtree"] == got["topk"]  # a tie on the answer: more of the page legible
    name, _, _ = choose({"quadtree": lambda: fine, "topk": lambda: first_only}, grid, 16, likely)
    assert name == "quadtree"
    assert choose({"quadtree": lambda: fine, "topk": lambda: fine}, grid, 16, likely)[0] == "quadtree"  # both: first


def test_a_hull_is_completed_and_weighed_like_a_line():
    """An answer over two lines: the first likely (0.6), the second not (0.005, under ``MIN_PROBABILITY``), the
    extent's hull of both at 0.5.  Top-k completes the hull's tiles, both lines with the blank between, and ``auto``
    counts the hull in its expectation; without the hull only the first line is completed."""
    grid, patch = (6, 12), 16
    boxes = np.array([[16.0, 16.0, 112.0, 30.0], [16.0, 40.0, 80.0, 54.0]])
    heights = np.array([12.0, 12.0])
    lines = LikelyLines(boxes, heights, np.array([0.6, 0.005]))
    hull = np.array([[16.0, 16.0, 112.0, 54.0]])
    both = dataclasses.replace(lines, hulls=hull, hull_heights=np.array([12.0]), hull_probs=np.array([0.5]))
    spans, values = answer_spans(both, grid, patch)
    np.testing.assert_array_equal(spans, [[1, 2, 1, 7], [1, 4, 1, 7]])  # the first line, then the hull
    np.testing.assert_array_equal(values, [0.6, 0.5])
    assert len(answer_spans(lines, grid, patch)[0]) == 1
    score0 = np.zeros(grid, np.float32)
    score0[5, :] = 1.0  # the cascade alone would spend its tiles on the bottom row
    ranked = [(0, 5, c) for c in range(12)]
    got = {(r, c) for _, r, c in lines_first(ranked, score0, spans, values, 18)}
    assert {(r, c) for r in range(1, 4) for c in range(1, 7)} <= got  # the hull's 18 tiles: both lines legible
    alone = {(r, c) for _, r, c in lines_first(ranked, score0, *answer_spans(lines, grid, patch), 18)}
    assert not {(3, c) for c in range(1, 5)} <= alone  # the second line left to the cascade
    fine = [(0, r, c) for r in range(6) for c in range(12)]
    assert legible_answer(fine, grid, patch, both) == (pytest.approx(0.6 + 0.5), 1.0)  # the hull counts too
    assert legible_answer(fine, grid, patch, lines) == (pytest.approx(0.6), 1.0)


@pytest.mark.parametrize("budget", [64, 144, 273])
def test_auto_is_the_better_of_the_two_layouts(page_texture, budget):
    weights = load_weights("default")
    for question in QUESTIONS:
        auto = select(page_texture, question, budget, cut=False)
        assert auto.mode in ("quadtree", "topk") and len(auto) <= budget
        both = {m: select(page_texture, question, budget, mode=m, cut=False) for m in ("quadtree", "topk")}
        assert _tiles(auto) == _tiles(both[auto.mode])  # the same tiles as that mode alone
        assert np.array_equal(auto.gist, both[auto.mode].gist)
        lines = query_maps(page_texture, Query.coerce(question), weights).lines  # what auto weighs the layouts by
        assert lines is not None
        got = {
            m: legible_answer(_tiles(s), page_texture.level_shapes[0], page_texture.patch_size, lines)
            for m, s in both.items()
        }
        assert got[auto.mode] == max(got.values())  # the answer's expectation, then the page's legible print
        note = next(n for n in auto.notes if n.startswith(f"auto: {auto.mode}"))
        assert ("a tie" in note) == (abs(got["quadtree"][0] - got["topk"][0]) <= 1e-6)
        again = select(page_texture, question, budget, cut=False)
        assert _tiles(again) == _tiles(auto)  # deterministic


def test_auto_is_the_quadtree_without_a_learned_text_term(page_texture):
    for query, weights in ((None, "default"), ({"points": [(300, 300)]}, "default"), ("What is the total?", "handset")):
        auto = select(page_texture, query, 144, weights=weights, cut=False)
        quad = select(page_texture, query, 144, weights=weights, mode="quadtree", cut=False)
        assert auto.mode == "quadtree" and _tiles(auto) == _tiles(quad)


def _slow_lines_first(ranked, score0, spans, values, k):
    """``lines_first`` written out with sets: each greedy (most value per tile not yet taken, then most value; the
    first span on ties) while a span fits, the ranked tiles after it, and of those and the ranked tiles alone the set
    worth most (each span's value times its share taken; the ranked tiles on ties)."""
    tiles = [{(r, c) for r in range(r0, r1) for c in range(c0, c1)} for r0, r1, c0, c1 in spans]

    def worth(chosen):
        return sum(v * len(t & chosen) / len(t) for v, t in zip(values, tiles) if t)

    best = {(r, c) for _, r, c in ranked[:k]}
    best_worth, found = worth(best), False
    for per_tile in (True, False):
        taken: set = set()
        open_ = [i for i, t in enumerate(tiles) if t]
        while True:
            pick, pick_v = None, -np.inf
            for i in open_:
                new = len(tiles[i] - taken)
                v = values[i] / new if per_tile and new else values[i]
                if 0 < new <= k - len(taken) and v > pick_v:
                    pick, pick_v = i, v
            if pick is None:
                break
            taken |= tiles[pick]
            open_.remove(pick)
        if not taken:
            continue
        for _, r, c in ranked:
            if len(taken) == k:
                break
            taken.add((r, c))
        if worth(taken) > best_worth + 1e-12:
            best, best_worth, found = taken, worth(taken), True
    if not found:
        return [(r, c) for _, r, c in ranked[:k]]
    return sorted(best, key=lambda t: (-score0[t], t[0] * score0.shape[1] + t[1]))


@pytest.mark.parametrize("seed", range(12))
def test_lines_first_equals_a_slow_greedy_and_spends_exactly_k(seed):
    rng = np.random.default_rng(seed)
    gh, gw = int(rng.integers(4, 30)), int(rng.integers(4, 30))
    score0 = rng.random((gh, gw)).astype(np.float32)
    score0[rng.random((gh, gw)) < 0.2] = 0.5  # ties in the score, broken by raster order
    k = int(rng.integers(1, gh * gw + 1))
    n = int(rng.integers(0, 12))
    r0, c0 = rng.integers(0, gh, n), rng.integers(0, gw, n)
    spans = np.stack(
        [r0, np.minimum(r0 + rng.integers(0, 3, n), gh), c0, np.minimum(c0 + rng.integers(0, 9, n), gw)], 1
    )
    values = rng.choice([0.5, 0.2, 0.05, 0.01], n)  # repeated values: ties between spans too
    flat = np.lexsort((np.arange(gh * gw), -score0.ravel()))[:k]
    ranked = [(0, int(i // gw), int(i % gw)) for i in flat]
    got = lines_first(ranked, score0, spans, values, k)
    assert [(r, c) for _, r, c in got] == _slow_lines_first(ranked, score0, spans, values, k)
    assert len(got) == len(set(got)) == k and all(lvl == 0 for lvl, _, _ in got)
    area = (spans[:, 1] - spans[:, 0]) * (spans[:, 3] - spans[:, 2]) if n else np.zeros(0)
    if not ((area > 0) & (area <= k)).any():
        assert got == ranked  # nothing fits: the cascade's tiles as they were


def test_lines_first_keeps_a_long_likely_line_over_many_cheap_unlikely_ones():
    """The classic greedy's trap: five one-tile lines of value 0.1 (0.1 per tile) come before a ten-tile line of
    value 0.9 (0.09 per tile) and leave no room for it in 10 tiles; the greedy by value takes the long line whole."""
    score0 = np.zeros((4, 12), np.float32)
    score0[3, :10] = 1.0  # the cascade would spend everything on row 3
    ranked = [(0, 3, c) for c in range(10)]
    spans = np.array([[0, 1, 0, 10]] + [[2, 3, c, c + 1] for c in range(0, 10, 2)])
    values = np.array([0.9] + [0.1] * 5)
    got = lines_first(ranked, score0, spans, values, 10)
    assert sorted(got) == [(0, 0, c) for c in range(10)]
    assert lines_first(ranked, score0, spans, np.array([0.01] + [0.0] * 5), 10) != ranked  # 0.01 on one whole line
    assert lines_first(ranked, score0, spans, np.zeros(6), 10) == ranked  # worth nothing: the cascade's own


def test_the_top_k_layout_completes_likely_lines(page_texture):
    """With the learned text term, top-k completes its likely lines first: it leaves at least as much of their
    probability legible as the plain cascade on the same scores (to the slack between tile counts and box areas),
    and more for some question."""
    weights = load_weights("default")
    scorer = resolve_scorer(weights, None, page_texture.channels, page_texture.device)
    shape, patch, n_levels = page_texture.level_shapes[0], page_texture.patch_size, len(page_texture.level_shapes)
    gained = 0
    for budget in (20, 64):
        cfg = SelectConfig(budget=budget, mode="topk")
        gist, k = topk_split(page_texture.level_shapes, budget, cfg.gist)
        for question in QUESTIONS:
            sc = score_texture(page_texture, Query.coerce(question), scorer)
            assert sc.lines is not None and len(answer_spans(sc.lines, shape, patch)[0])
            sel = select(page_texture, question, budget, mode="topk", cut=False)
            plain = gist + _topk_tiles(dataclasses.replace(sc, lines=None), cfg, n_levels, k, patch)
            got = {
                name: legible_answer(tiles, shape, patch, sc.lines)[0]
                for name, tiles in (("lines first", _tiles(sel)), ("plain", plain))
            }
            assert got["lines first"] >= got["plain"] - 0.01
            gained += got["lines first"] > got["plain"] + 0.01
    assert gained
