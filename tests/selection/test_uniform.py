"""The uniform layout (what a standard VLM takes) and the learned floor that falls back to it."""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest

from foveate import select
from foveate.eval.baselines import uniform_tokens
from foveate.eval.metrics import query_metrics
from foveate.selection.uniform import cut_uniform, uniform_grid, uniform_scale
from foveate.weights import FloorGate, Weights


@pytest.mark.parametrize("size", [(1100, 850), (480, 640), (37, 1000), (16, 16), (1000, 1)])
@pytest.mark.parametrize("budget", [1, 7, 64, 273, 5000])
def test_uniform_grid_fits_the_budget_and_covers_the_image(size, budget):
    boxes, s, (ny, nx) = uniform_grid(size, 16, budget)
    h, w = size
    assert len(boxes) == ny * nx <= budget and s >= 1.0
    assert boxes[:, 0].min() == 0 and boxes[:, 1].min() == 0 and boxes[:, 2].max() == w and boxes[:, 3].max() == h
    assert np.isclose(((boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])).sum(), h * w)
    # the smallest such scale: a little finer no longer fits
    finer = s * (1 - 1e-6)
    if finer >= 1.0:
        assert math.ceil(w / (finer * 16) - 1e-9) * math.ceil(h / (finer * 16) - 1e-9) > budget


def test_cut_uniform_is_an_area_resize():
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (300, 450, 3), dtype=np.uint8)
    boxes, s, (ny, nx) = uniform_grid(img.shape[:2], 16, 64)
    tiles = cut_uniform(img, s, 16, (ny, nx))
    small = cv2.resize(img, (round(450 / s), round(300 / s)), interpolation=cv2.INTER_AREA)
    assert tiles.shape == (ny * nx, 16, 16, 3)
    np.testing.assert_array_equal(tiles[0], small[:16, :16])
    np.testing.assert_array_equal(tiles[1], small[:16, 16:32])


def test_uniform_mode_is_the_baseline_the_evaluation_compares_with(page_texture):
    sel = select(page_texture, "total due", 144, mode="uniform")
    base = uniform_tokens(page_texture.image_size, 16, 144)
    assert sel.layout == "uniform" and len(sel) == len(base) <= 144
    np.testing.assert_allclose(sel.boxes, np.rint(base.boxes))
    assert np.allclose(sel.scales, base.scales) and sel.to_dict()["uniform_scale"] == pytest.approx(base.scales[0])
    assert tuple(sel.patches.shape) == (len(sel), 3, 16, 16)
    # the same hit for any ground truth: the rounding of the boxes changes nothing the metric sees
    rng = np.random.default_rng(0)
    for _ in range(20):
        x0, y0 = rng.uniform(0, 700), rng.uniform(0, 1000)
        gt = [[x0, y0, x0 + rng.uniform(5, 150), y0 + rng.uniform(5, 90)]]
        a = query_metrics(sel.boxes, None, gt, page_texture.image_size, token_scales=sel.scales)
        b = query_metrics(base.boxes, None, gt, page_texture.image_size, token_scales=base.scales)
        assert a.hit == b.hit and a.legible_coverage == pytest.approx(b.legible_coverage, abs=0.02)
    assert (sel.level_map() >= 0).all()


def _gated(bias: float) -> Weights:
    w = Weights.handset()
    return Weights("gated", w.channel, w.need, w.query, w.query_need, floor=FloorGate({"bias": bias}))


def test_the_floor_follows_its_gate_and_can_be_switched_off(page_texture):
    uni = select(page_texture, "total due", 144, weights=_gated(-1.0))
    assert uni.layout == "uniform" and any("uniform floor" in n for n in uni.notes)
    fov = select(page_texture, "total due", 144, weights=_gated(1.0))
    assert fov.layout == "pyramid" and fov.mode == "quadtree"
    off = select(page_texture, "total due", 144, weights=_gated(-1.0), floor="off")
    assert off.layout == "pyramid"
    np.testing.assert_array_equal(off.boxes, fov.boxes)
    assert select(page_texture, "total due", 144, weights="handset").layout == "pyramid"  # no gate: never


def test_uniform_scale_of_a_budget_too_small():
    from foveate import BudgetError

    with pytest.raises(BudgetError):
        uniform_scale((100, 100), 16, 0)
    assert uniform_scale((100, 100), 16, 1) == pytest.approx(100 / 16)
