"""Metrics on hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest

from foveate.eval.metrics import legible_level, query_metrics

SIZE = (256, 256)


def random_boxes(rng, n: int, grow: tuple[int, int]) -> np.ndarray:
    """(n, 4) integer boxes with corners in [0, 200) and sides in [grow[0], grow[1])."""
    xy = rng.integers(0, 200, (n, 2))
    return np.concatenate([xy, xy + rng.integers(*grow, (n, 2))], 1)


def random_case(rng, n: int, levels: int, gt_grow: tuple[int, int]):
    """``n`` random tokens, their levels in [0, levels), and 3 random ground-truth boxes."""
    toks = random_boxes(rng, n, (8, 60))
    return toks, rng.integers(0, levels, n), random_boxes(rng, 3, gt_grow)


def raster(boxes) -> np.ndarray:
    """The pixels of ``SIZE`` inside any of ``boxes`` (integer (K, 4)): the slow, obvious reference."""
    grid = np.zeros(SIZE, bool)
    for x0, y0, x1, y1 in np.clip(boxes, 0, 256):
        grid[y0:y1, x0:x1] = True
    return grid


def m(tokens, levels, gts, heights=None, **kw):
    return query_metrics(
        np.array(tokens, float).reshape(-1, 4), np.array(levels), np.array(gts, float), SIZE, heights, **kw
    )


def test_legible_level():
    assert legible_level(8) == 0 and legible_level(15.9) == 0 and legible_level(16) == 1
    assert legible_level(64) == 3 and legible_level(7.9) == -1
    assert legible_level(24, min_px=12) == 1


def test_box_exactly_covered_by_one_level0_tile():
    r = m([[16, 16, 32, 32]], [0], [[16, 16, 32, 32]])
    assert r.coverage == 1.0 and r.legible_coverage == 1.0 and r.hit


def test_half_covered():
    r = m([[0, 0, 16, 16]], [0], [[8, 0, 24, 16]])
    assert r.coverage == pytest.approx(0.5) and r.legible_coverage == pytest.approx(0.5) and not r.hit


def test_covered_only_at_a_coarse_level():
    # a 16 px tall box is legible up to level 1; a level-3 token (128 px) covers it but blurs it 8x
    r = m([[0, 0, 128, 128]], [3], [[10, 10, 50, 26]])
    assert r.coverage == 1.0 and r.legible_coverage == 0.0 and not r.hit
    r = m([[0, 0, 32, 32], [32, 0, 64, 32]], [1, 1], [[10, 10, 50, 26]])
    assert r.legible_coverage == 1.0 and r.hit


def test_box_crossing_tile_edges():
    toks = [[0, 0, 16, 16], [16, 0, 32, 16], [0, 16, 16, 32]]
    r = m(toks, [0, 0, 0], [[8, 8, 24, 24]])  # three of the four quarters covered
    assert r.coverage == pytest.approx(0.75) and r.legible_coverage == pytest.approx(0.75)
    r = m(toks + [[16, 16, 32, 32]], [0] * 4, [[8, 8, 24, 24]])
    assert r.coverage == 1.0 and r.hit


def test_overlapping_tokens_are_not_double_counted():
    r = m([[0, 0, 64, 64], [0, 0, 16, 16]], [2, 0], [[0, 0, 32, 32]])
    assert r.coverage == 1.0
    assert r.legible_coverage == 1.0  # 32 px tall: legible up to level 2, so the level-2 token counts
    r2 = m([[0, 0, 64, 64], [0, 0, 16, 16]], [2, 0], [[0, 0, 32, 32]], heights=[10])  # 10 px text: level 0 only
    assert r2.legible_coverage == pytest.approx(0.25) and r2.coverage == 1.0


def test_several_boxes_and_hit_requires_all():
    gts = [[0, 0, 16, 16], [100, 100, 116, 116]]
    r = m([[0, 0, 16, 16]], [0], gts)
    assert r.coverage == pytest.approx(0.5) and not r.hit
    assert [b["legible_coverage"] for b in r.per_box] == [1.0, 0.0]
    r = m([[0, 0, 16, 16], [96, 96, 128, 128]], [0, 1], gts)
    assert r.hit


def test_hit_threshold():
    toks = [[0, 0, 16, 16]]
    gts = [[0, 0, 16, 17]]  # 16/17 = 0.94 covered
    assert m(toks, [0], gts).hit
    assert not m(toks, [0], gts, hit_threshold=0.95).hit


def test_degenerate_and_outside_boxes():
    r = m([[0, 0, 16, 16]], [0], [[5, 5, 5, 20], [300, 300, 400, 400], [0, 0, 16, 16]])
    assert r.degenerate == 2 and r.coverage == 1.0 and r.hit
    r = m([[0, 0, 16, 16]], [0], [[5, 5, 5, 20]])
    assert r.degenerate == 1 and r.coverage == 0.0 and not r.hit
    r = m([[0, 0, 16, 16]], [0], [[-10, -10, 8, 8]])  # clipped to the image first
    assert r.coverage == 1.0


def test_no_tokens():
    r = query_metrics(np.zeros((0, 4)), np.zeros(0), np.array([[0, 0, 10, 10]]), SIZE)
    assert r.coverage == 0.0 and not r.hit


def test_against_a_pixel_raster():
    rng = np.random.default_rng(0)
    for _ in range(20):
        toks, gts = random_boxes(rng, 15, (8, 60)), random_boxes(rng, 3, (1, 50))
        r = m(toks, np.zeros(15, int), gts)
        grid, g = raster(toks), raster(gts)
        assert r.coverage == pytest.approx((g & grid).sum() / g.sum())


def test_per_box_legible_coverage_against_a_pixel_raster():
    """Each box's coverage and legible coverage (only tokens of a level its text survives) against a raster."""
    rng = np.random.default_rng(3)
    for _ in range(20):
        toks, levels, gts = random_case(rng, 25, 3, (1, 50))
        heights = rng.uniform(6, 40, 3)
        r = m(toks, levels, gts, heights)
        for box, h, got in zip(np.clip(gts, 0, 256), heights, r.per_box):
            x0, y0, x1, y1 = box
            for key, keep in (("coverage", np.ones(25, bool)), ("legible_coverage", h / 2.0**levels >= 8)):
                inside = raster(toks[keep])[y0:y1, x0:x1]
                assert got[key] == pytest.approx(inside.mean() if inside.size else 0.0)


# -- per-token scales (a token grid that is not a pyramid level, as the uniform baseline's), hand-computed


def test_scales_give_the_same_result_as_levels():
    rng = np.random.default_rng(1)
    for _ in range(20):
        toks, levels, gts = random_case(rng, 12, 4, (4, 50))
        a = query_metrics(toks, levels, gts, (256, 256))
        b = query_metrics(toks, None, gts, (256, 256), token_scales=2.0**levels)
        assert (a.coverage, a.legible_coverage, a.hit) == (b.coverage, b.legible_coverage, b.hit)


def test_fractional_scale_legibility():
    box = [[10, 10, 60, 30]]  # 20 px tall
    tok = [[0, 0, 100, 100]]
    assert query_metrics(tok, None, box, (100, 100), token_scales=[2.5]).legible_coverage == 1.0  # 20/2.5 = 8
    assert query_metrics(tok, None, box, (100, 100), token_scales=[2.6]).legible_coverage == 0.0  # 7.7 px
    # text height, not box height, decides: a 3-line box of 10 px lines blurs at scale 1.3 (7.7 px)
    r = query_metrics(tok, None, [[0, 0, 50, 30]], (100, 100), [10], token_scales=[1.3])
    assert r.coverage == 1.0 and r.legible_coverage == 0.0 and not r.hit
    with pytest.raises(ValueError):
        query_metrics(tok, None, box, (100, 100))
    with pytest.raises(ValueError):
        query_metrics(tok, None, box, (100, 100), token_scales=[1, 2])
