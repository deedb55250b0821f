"""The ``auto`` mode: its legibility estimate against the evaluation's exact metric and ``Selection.level_map``, its
choice against both layouts computed separately, and its fallbacks."""

from __future__ import annotations

import numpy as np
import pytest

from foveate import select
from foveate.eval.metrics import query_metrics
from foveate.query.base import LikelyLines
from foveate.query.query import Query
from foveate.query.terms import query_maps
from foveate.selection.auto import choose, expected_legible, finest_levels, legible_share
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


def test_choose_keeps_the_default_on_ties_and_makes_nothing_it_does_not_need():
    grid = (4, 4)
    boxes, heights = np.array([[0.0, 0.0, 16.0, 16.0]]), np.array([12.0])

    def never():
        raise AssertionError("made a candidate that could not change the choice")

    coarse = [(2, 0, 0)]  # one 64 px tile: 12 px text is blurred
    fine = [(0, r, c) for r in range(4) for c in range(4)]
    assert choose({"quadtree": lambda: coarse, "topk": never}, grid, 16, None)[:2] == ("quadtree", coarse)
    likely = LikelyLines(boxes, heights, np.array([0.9]))
    assert choose({"quadtree": lambda: fine, "topk": never}, grid, 16, likely)[0] == "quadtree"
    name, tiles, got = choose({"quadtree": lambda: coarse, "topk": lambda: coarse + fine}, grid, 16, likely)
    assert (name, tiles) == ("topk", coarse + fine) and got == pytest.approx({"quadtree": 0.0, "topk": 0.9})
    assert (
        choose({"quadtree": lambda: coarse, "topk": lambda: coarse}, grid, 16, likely)[0] == "quadtree"
    )  # a tie keeps the default


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
            m: expected_legible(
                _tiles(s),
                page_texture.level_shapes[0],
                page_texture.patch_size,
                lines.boxes,
                lines.heights,
                lines.probs,
            )
            for m, s in both.items()
        }
        assert got[auto.mode] == max(got.values())
        if auto.mode == "topk":
            assert got["topk"] > got["quadtree"] and any(n.startswith("auto: topk") for n in auto.notes)
        again = select(page_texture, question, budget, cut=False)
        assert _tiles(again) == _tiles(auto)  # deterministic


def test_auto_is_the_quadtree_without_a_learned_text_term(page_texture):
    for query, weights in ((None, "default"), ({"points": [(300, 300)]}, "default"), ("What is the total?", "handset")):
        auto = select(page_texture, query, 144, weights=weights, cut=False)
        quad = select(page_texture, query, 144, weights=weights, mode="quadtree", cut=False)
        assert auto.mode == "quadtree" and _tiles(auto) == _tiles(quad)
