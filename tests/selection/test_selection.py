"""Selection: against slow exhaustive references, invariants, prompts, budgets, determinism."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from foveate import BudgetError, ConfigError, QueryError, SelectConfig, Texture, encode, select
from foveate.selection import quadtree_select, topk_select

from ..conftest import random_image


def random_pyramid(shapes, seed):
    rng = np.random.default_rng(seed)
    score = [rng.normal(size=s).astype(np.float32) for s in shapes]
    need = [rng.uniform(0.05, 1.0, size=s).astype(np.float32) for s in shapes]
    return score, need


def slow_quadtree(score, need, budget, alpha=1.0, min_level=0):
    """The same greedy rule, by scanning every leaf at every step."""
    shapes = [s.shape for s in score]
    top = len(shapes) - 1
    leaves = {(top, r, c) for r in range(shapes[top][0]) for c in range(shapes[top][1])}
    dead = set()
    while True:
        cands = [t for t in leaves if t[0] > min_level and t not in dead]
        if not cands:
            break

        def key(t):
            return (
                score[t[0]][t[1], t[2]] + math.log(need[t[0]][t[1], t[2]]) + t[0] * alpha * math.log(2),  # noqa: E731
                t[0],
                -t[1],
                -t[2],
            )

        best = max(cands, key=key)
        lvl, r, c = best
        gh, gw = shapes[lvl - 1]
        kids = {(lvl - 1, rr, cc) for rr in (2 * r, 2 * r + 1) for cc in (2 * c, 2 * c + 1) if rr < gh and cc < gw}
        if len(leaves) + len(kids) - 1 > budget:
            dead.add(best)
            continue
        leaves = (leaves - {best}) | kids
    return sorted(leaves, key=lambda t: (-t[0], t[1], t[2]))


SHAPES = {
    "square": [(8, 8), (4, 4), (2, 2), (1, 1)],
    "odd": [(7, 5), (4, 3), (2, 2), (1, 1)],
    "strip": [(13, 1), (7, 1), (4, 1)],
}


@pytest.mark.parametrize("name", list(SHAPES))
@pytest.mark.parametrize("budget", [1, 4, 10, 25, 64, 1000])
@pytest.mark.parametrize("seed", [0, 1])
def test_quadtree_matches_exhaustive_reference(name, budget, seed):
    shapes = SHAPES[name]
    score, need = random_pyramid(shapes, seed)
    roots = shapes[-1][0] * shapes[-1][1]
    if budget < roots:
        with pytest.raises(BudgetError):
            quadtree_select(score, need, budget)
        return
    got = quadtree_select(score, need, budget)
    assert got == slow_quadtree(score, need, budget)


def _cover_counts(tiles, shapes):
    counts = np.zeros(shapes[0], np.int64)
    for lvl, r, c in tiles:
        f = 1 << lvl
        counts[r * f : (r + 1) * f, c * f : (c + 1) * f] += 1
    return counts


@pytest.mark.parametrize("name", list(SHAPES))
@pytest.mark.parametrize("alpha", [0.0, 1.0, 2.0])
def test_quadtree_leaves_are_disjoint_and_cover(name, alpha):
    shapes = SHAPES[name]
    score, need = random_pyramid(shapes, 3)
    for budget in range(shapes[-1][0] * shapes[-1][1], 70):
        tiles = quadtree_select(score, need, budget, alpha)
        assert len(tiles) <= budget
        assert (_cover_counts(tiles, shapes) == 1).all()


def test_quadtree_spends_the_budget_up_to_the_split_granularity():
    shapes = SHAPES["square"]
    score, need = random_pyramid(shapes, 4)
    for budget in range(1, 64):
        n = len(quadtree_select(score, need, budget))
        assert budget - 2 <= n <= budget  # every split adds 3 tokens on a full quadtree
    assert len(quadtree_select(score, need, 10**6)) == 64  # everything at level 0, not more


def test_quadtree_min_level():
    shapes = SHAPES["square"]
    score, need = random_pyramid(shapes, 5)
    tiles = quadtree_select(score, need, 1000, min_level=1)
    assert min(t[0] for t in tiles) == 1 and len(tiles) == 16


@pytest.mark.parametrize("k", [1, 5, 17, 56])
def test_topk_without_pruning_is_plain_topk(k):
    shapes = [(8, 7), (4, 4), (2, 2), (1, 1)]
    score, _ = random_pyramid(shapes, 6)
    got = topk_select(score, k, (3, 1, 0), (None, None))
    flat = score[0].ravel()
    want = np.argsort(-flat, kind="stable")[:k]
    assert [(r * 7 + c) for _, r, c in got] == list(want)


def test_topk_pruning_keeps_k_and_finds_a_peak_region():
    shapes = [(64, 64), (32, 32), (16, 16), (8, 8), (4, 4)]
    score, _ = random_pyramid(shapes, 7)
    score = [s * 0.01 for s in score]
    for lvl in range(5):  # a consistent hot region, visible at every level
        f = 1 << lvl
        score[lvl][40 // f : 48 // f, 8 // f : 16 // f] += 5.0
    got = topk_select(score, 64, (4, 2, 0), (50, 100))
    assert len(got) == 64 == len(set(got))
    assert all(40 <= r < 48 and 8 <= c < 16 for _, r, c in got)
    assert got == topk_select(score, 64, (4, 2, 0), (None, None))  # pruning lost nothing here


def test_select_invariants_on_real_textures(page_texture, photo_texture):
    for tex in (page_texture, photo_texture):
        h, w = tex.image_size
        for mode, floor in (("quadtree", "auto"), ("quadtree", "off"), ("topk", "auto")):
            for budget in (20, 64, 273, 576):
                sel = select(tex, None, budget, mode=mode, floor=floor)  # auto: the uniform floor may answer
                assert 0 < len(sel) <= budget
                assert (sel.boxes[:, 0] >= 0).all() and (sel.boxes[:, 1] >= 0).all()
                assert (sel.boxes[:, 2] <= w).all() and (sel.boxes[:, 3] <= h).all()
                assert (sel.boxes[:, 2] > sel.boxes[:, 0]).all() and (sel.boxes[:, 3] > sel.boxes[:, 1]).all()
                assert ((sel.centers >= 0) & (sel.centers <= 1)).all()
                assert sel.patches.shape == (len(sel), 3, tex.patch_size, tex.patch_size)
                if mode == "quadtree" and floor == "off":
                    assert sel.layout == "pyramid"
                if mode == "quadtree":
                    if sel.layout == "pyramid":
                        assert (_cover_counts(zip(sel.levels, sel.rows, sel.cols), tex.level_shapes) == 1).all()
                else:
                    assert len(sel) == budget  # topk spends the budget exactly
                    n_gist = tex.level_shapes[-1][0] * tex.level_shapes[-1][1]
                    assert sel.gist.sum() == (n_gist if n_gist < budget else 0)


def test_tokens_are_area_resampled_pixels(photo_texture):
    tex = photo_texture
    sel = select(tex, None, 100, mode="quadtree", floor="off")  # pyramid tokens (the uniform layout: test_uniform)
    img = tex.image.astype(np.float64)
    for i in range(len(sel)):
        lvl = int(sel.levels[i])
        x0, y0, x1, y1 = sel.boxes[i]
        side = 16 << lvl
        if x1 - x0 < side or y1 - y0 < side:
            continue  # partial border tiles include padding
        ref = img[y0:y1, x0:x1].reshape(16, side // 16, 16, side // 16, 3).mean(axis=(1, 3))
        got = sel.patches[i].permute(1, 2, 0).numpy().astype(np.float64)
        assert np.abs(got - ref).max() <= lvl + 1  # one rounding per pyramid level


def test_box_prompt_pulls_level0_tokens_into_the_box(page_texture):
    box = (560, 450, 790, 550)
    sel = select(page_texture, {"boxes": [box]}, 273)
    fine = sel.boxes[sel.levels == 0]
    inside = (fine[:, 0] < box[2]) & (fine[:, 2] > box[0]) & (fine[:, 1] < box[3]) & (fine[:, 3] > box[1])
    assert inside.mean() > 0.8
    blind = select(page_texture, None, 273)
    assert sel.levels[_overlaps(sel.boxes, box)].mean() < blind.levels[_overlaps(blind.boxes, box)].mean()


def _overlaps(boxes, box):
    return (boxes[:, 0] < box[2]) & (boxes[:, 2] > box[0]) & (boxes[:, 1] < box[3]) & (boxes[:, 3] > box[1])


def test_point_prompts_positive_and_negative(photo_texture):
    pos = select(photo_texture, {"points": [(100, 400)]}, 64, mode="topk", gist=False)
    d = np.hypot(pos.centers[:, 0] * 512 - 100, pos.centers[:, 1] * 512 - 400)
    assert d.min() < 16 and (d[:10] < 48).all()  # topk returns tokens best first: the point's tiles lead
    blind = select(photo_texture, None, 273, mode="topk", gist=False)
    x, y = blind.centers[0] * 512  # where saliency alone looks first
    neg = select(photo_texture, {"points": [(x, y)], "point_labels": [0]}, 273, mode="topk", gist=False)
    dn = np.hypot(neg.centers[:, 0] * 512 - x, neg.centers[:, 1] * 512 - y)
    assert dn.min() > 24  # "not here" removes what saliency alone picked first


def test_bad_budgets_modes_and_prompts(page_texture):
    for bad in (0, -5):
        with pytest.raises(BudgetError):
            select(page_texture, None, bad)
    with pytest.raises(BudgetError):
        select(page_texture, None, 2.5)
    with pytest.raises(BudgetError, match="coarsest"):
        select(page_texture, None, 3, mode="quadtree")  # the 850x1100 page has 4x5 = 20 tiles at level 4
    assert len(select(page_texture, None, 3, mode="topk")) == 3
    low = select(page_texture, None, 3)  # auto: below the quadtree's cover, the top-k layout is the one left
    assert (low.mode, len(low)) == ("topk", 3) and any("no gist" in n for n in low.notes)
    with pytest.raises(ConfigError, match="unknown selection mode"):
        select(page_texture, None, mode="spiral")
    with pytest.raises(QueryError, match="outside"):
        select(page_texture, {"points": [(5000, 10)]})
    with pytest.raises(QueryError, match="outside"):
        select(page_texture, {"boxes": [(2000, 10, 2100, 50)]})
    with pytest.raises(QueryError, match="empty"):
        select(page_texture, {"boxes": [(50, 50, 40, 60)]})
    with pytest.raises(QueryError, match="labels"):
        select(page_texture, {"points": [(5, 5)], "point_labels": [2]})
    with pytest.raises(QueryError, match="unknown query field"):
        select(page_texture, {"txt": "hello"})
    with pytest.raises(ConfigError, match="topk_levels"):
        SelectConfig(topk_levels=(0, 2))
    with pytest.raises(ConfigError, match="no field budjet; valid: budget, mode"):
        select(page_texture, None, budjet=64)


def test_budget_above_the_number_of_tiles():
    tex = encode(random_image(64, 48), preset="fast", device="cpu")  # 4x3 = 12 level-0 tiles
    q = select(tex, None, 1000)
    assert len(q) == 12 and (q.levels == 0).all() and any("exceeds" in n for n in q.notes)
    t = select(tex, None, 1000, mode="topk")
    assert (t.levels == 0).sum() == 12 and len(t) <= 1000


def test_tiny_and_extreme_images():
    for h, w in ((1, 1), (10, 10000), (10000, 10), (5, 17)):
        tex = encode(random_image(h, w, seed=h), preset="fast", device="cpu")
        for mode in ("quadtree", "topk"):
            sel = select(tex, None, 273, mode=mode)
            assert 1 <= len(sel) <= 273
            assert (sel.boxes[:, 2] <= w).all() and (sel.boxes[:, 3] <= h).all()
            assert sel.patches.shape[1:] == (3, 16, 16)


def test_select_is_deterministic_and_survives_save_load(tmp_path, page_texture):
    q = {"text": "total", "points": [(700, 530)]}
    a = select(page_texture, q, 273)
    b = select(page_texture, q, 273)
    loaded = Texture.load(page_texture.save(tmp_path / "p.fvt"))
    c = select(loaded, q, 273)
    for other in (b, c):
        for f in ("levels", "rows", "cols", "boxes", "scores"):
            np.testing.assert_array_equal(getattr(a, f), getattr(other, f))
        assert (a.patches == other.patches).all()
    for mode in ("topk",):
        x, y = select(page_texture, q, 144, mode=mode), select(loaded, q, 144, mode=mode)
        np.testing.assert_array_equal(x.boxes, y.boxes)


def test_selection_json_is_complete(page_texture):
    import json

    sel = select(page_texture, {"text": "total due", "boxes": [(560, 450, 790, 550)]}, 64, explain=True)
    doc = json.loads(json.dumps(sel.to_dict()))
    assert doc["num_tokens"] == len(doc["tokens"]) == len(sel) and doc["budget"] == 64
    assert doc["image"] == {"width": 850, "height": 1100}
    tok = doc["tokens"][0]
    assert set(tok) == {"level", "row", "col", "box", "center", "grid", "score", "gist"}
    assert "query:prompt" in doc["explain"]
    assert sum(doc["level_counts"].values()) == len(sel)


def test_long_and_empty_queries(page_texture):
    long = select(page_texture, "x" * 10_000, 64)
    assert any("truncated" in n for n in long.notes)
    empty = select(page_texture, "   ", 64)
    assert empty.query.text is None
    np.testing.assert_array_equal(empty.boxes, select(page_texture, None, 64).boxes)


def test_to_dict_tokens_match_the_arrays(page_texture):
    import json

    sel = select(page_texture, {"points": [(300, 200)]}, 150, mode="topk")
    doc = json.loads(json.dumps(sel.to_dict()))
    assert len(doc["tokens"]) == len(sel)
    for i, t in enumerate(doc["tokens"]):
        assert (t["level"], t["row"], t["col"]) == (int(sel.levels[i]), int(sel.rows[i]), int(sel.cols[i]))
        assert t["box"] == [int(v) for v in sel.boxes[i]] and t["grid"] == [int(v) for v in sel.grid[i]]
        assert t["center"] == [round(float(v), 6) for v in sel.centers[i]]
        assert t["score"] == round(float(sel.scores[i]), 5) and t["gist"] is bool(sel.gist[i])


def _slow_level_map(sel):
    """The finest selected level over each level-0 tile, token by token (-1 where no token covers it)."""
    gh, gw = sel.relevance.shape
    out = np.full((gh, gw), -1, np.int64)
    for lvl, r, c in zip(sel.levels.tolist(), sel.rows.tolist(), sel.cols.tolist()):
        f = 1 << lvl
        for y in range(r * f, min((r + 1) * f, gh)):
            for x in range(c * f, min((c + 1) * f, gw)):
                if out[y, x] < 0 or lvl < out[y, x]:
                    out[y, x] = lvl
    return out


@pytest.mark.parametrize("h, w", [(240, 320), (181, 263), (37, 500)])
def test_level_map_equals_a_per_token_reference(h, w):
    """level_map (painted per level) against a token-by-token loop: quadtree, topk with and without gist, and random
    subsets of the tokens (gaps, overlapping levels, nothing selected), on grids the border cuts."""
    from foveate.selection import tile_geometry

    tex = encode(random_image(h, w, seed=h + w), preset="fast", device="cpu")
    rng = np.random.default_rng(h * w)
    sels = []
    for budget in (8, 40, 150):
        q = {"points": [(int(rng.integers(0, w)), int(rng.integers(0, h)))]}
        sels.append(select(tex, q, budget, mode="quadtree", cut=False))
        for gist in (True, False):
            sels.append(select(tex, q, budget, mode="topk", gist=gist, cut=False))
    assert any(s.gist.any() for s in sels) and any(s.mode == "quadtree" for s in sels)
    for sel in list(sels):
        for share in (0.0, 0.3, 0.7):
            keep = np.flatnonzero(rng.random(len(sel)) < share)
            levels, rows, cols = sel.levels[keep], sel.rows[keep], sel.cols[keep]
            if len(keep):  # add coarser tokens over kept ones: finer levels must win wherever they overlap
                up = rng.integers(1, 3, len(keep))
                levels = np.concatenate([levels, levels + up])
                rows, cols = np.concatenate([rows, rows >> up]), np.concatenate([cols, cols >> up])
            boxes, centers, grid = tile_geometry(
                levels, rows, cols, tex.image_size, tex.patch_size, tuple(sel.relevance.shape)
            )
            sels.append(
                dataclasses.replace(
                    sel,
                    levels=levels,
                    rows=rows,
                    cols=cols,
                    boxes=boxes,
                    centers=centers,
                    grid=grid,
                    gist=np.zeros(len(levels), bool),
                    scores=np.zeros(len(levels)),
                )
            )
    for sel in sels:
        got = sel.level_map()
        assert got.dtype == np.int64 and got.shape == sel.relevance.shape
        np.testing.assert_array_equal(got, _slow_level_map(sel))
    assert (sels[-3].level_map() == -1).all()  # the empty subset (share 0)
