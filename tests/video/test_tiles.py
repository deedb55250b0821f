"""Pure tile-grid helpers against independent references (slow loops, SciPy, a full mip build)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import ndimage

import foveate.video as video_mod
from foveate.core import ops
from foveate.video import (
    cells_to_tiles,
    cover_tiles,
    dilate_tiles,
    fixation_map,
    move_tiles,
    plan_crops,
    splat_matrix,
    tile_change,
    update_mips,
    warp_tile_maps,
)
from foveate.video import tiles as video_tiles


def test_tile_change_matches_a_slow_loop():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (37, 53, 3), dtype=np.uint8)
    b = a.copy()
    b[5, 7, 0] ^= 1  # one channel of one pixel, by one grey level
    b[30:37, 40:53] = rng.integers(0, 256, (7, 13, 3), dtype=np.uint8)
    got = tile_change(b, a, 8)
    assert got.shape == (5, 7)
    for r in range(5):
        for c in range(7):
            d = np.abs(b[r * 8 : r * 8 + 8, c * 8 : c * 8 + 8].astype(float) - a[r * 8 : r * 8 + 8, c * 8 : c * 8 + 8])
            assert got[r, c] == pytest.approx(d.mean(), abs=1e-5)
    assert (got > 0).sum() == 1 + np.count_nonzero(got[3:, 5:]) and got[0, 0] == 1 / 192


def test_dilate_tiles_matches_scipy():
    rng = np.random.default_rng(1)
    m = rng.random((23, 31)) < 0.05
    for k in (0, 1, 2, 5):
        ref = ndimage.binary_dilation(m, np.ones((2 * k + 1, 2 * k + 1), bool)) if k else m
        assert np.array_equal(dilate_tiles(m, k), ref)


@pytest.mark.parametrize("k", [0, 1, 2, 3])
def test_plan_crops_writes_each_tile_once_from_a_crop_with_its_margin(k):
    rng = np.random.default_rng(k)
    update = rng.random((30, 40)) < 0.03
    update[0, 0] = update[29, 39] = True
    plan = plan_crops(update, k, full_share=math.inf)
    written = np.zeros(update.shape, int)
    for (r0, c0, r1, c1), write in plan:
        ys, xs = np.nonzero(write)
        for y, x in zip(ys + r0, xs + c0):
            written[y, x] += 1
            # the tile's k-neighbourhood is inside the crop, or the crop reaches the grid's border there
            assert (y - k >= r0 or r0 == 0) and (y + k < r1 or r1 == 30)
            assert (x - k >= c0 or c0 == 0) and (x + k < c1 or c1 == 40)
    assert np.array_equal(written, update.astype(int))
    assert plan_crops(update, k, full_share=0.0) == [((0, 0, 30, 40), None)]
    assert plan_crops(np.zeros((3, 3), bool), k) == []


@pytest.mark.parametrize("call_cost", [0, 10**9])  # along the changed paths / whole levels
def test_update_mips_along_changed_paths_matches_a_full_build(monkeypatch, call_cost):
    monkeypatch.setattr(video_tiles, "MIP_CALL_COST", call_cost)
    calls = []
    real = ops.mip_down
    monkeypatch.setattr(video_tiles.ops, "mip_down", lambda *a: calls.append(a[0].shape) or real(*a))
    rng = np.random.default_rng(2)
    h, w, p = 330, 250, 16  # odd grids at several levels
    gh, gw = ops.grid_shape(h, w, p)
    x0 = rng.random((gh, gw, 6)).astype(np.float32)
    cov = ops.coverage0(h, w, p)
    means, maxes, covs = ops.build_mips(x0, cov, 5)
    changed = np.zeros((gh, gw), bool)
    changed[3:5, 7] = changed[gh - 1, gw - 1] = changed[10, 0] = True
    x1 = x0.copy()
    x1[changed, :2] = rng.random((changed.sum(), 2))
    x1[..., 4:] = rng.random((gh, gw, 2))  # channels that changed everywhere
    means[0][...] = maxes[0][...] = x1
    calls.clear()
    update_mips(means, maxes, covs, [(np.array([0, 1]), changed), (np.array([4, 5]), np.ones((gh, gw), bool))])
    made = list(calls)
    ref_means, ref_maxes, _ = ops.build_mips(x1, cov, 5)
    for a, b in zip(means + maxes, ref_means + ref_maxes):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)
    if call_cost == 0:  # small bands for channels 0-1, then every level whole for channels 4-5
        assert made[0] == (4, 2, 2) and (gh, gw, 2) in made and len(made) > 8
    else:  # one call per level, all channels
        assert made == [(gh, gw, 6)] + [m.shape for m in ref_means[1:-1]]


@pytest.mark.parametrize("mode", ["quadtree", "topk"])
def test_fixation_map_matches_the_level_map(photo_texture, mode):
    from foveate import select

    sel = select(photo_texture, {"points": [(250, 180)]}, 120, mode=mode, cut=False)
    lm = sel.level_map()
    np.testing.assert_array_equal(fixation_map(sel), np.where(lm >= 0, 0.25 ** np.maximum(lm, 0), 0.0))


@pytest.mark.parametrize("h, w", [(96, 160), (100, 148), (90, 170), (8, 12), (3, 5)])
def test_cells_to_tiles_equals_the_tile_mean_of_the_pixels(h, w):
    """Tile means from cell means (whole cells, and cells the image border cuts) equal the tile means of the pixels."""
    rng = np.random.default_rng(h * w)
    px = rng.random((h, w, 3)).astype(np.float32)
    for patch, cell in ((16, 4), (8, 4), (8, 2)):
        cells = ops.tile_mean(px, cell).reshape(-(-h // cell), -(-w // cell), 3)
        got = cells_to_tiles(cells, ops.coverage0(h, w, cell), patch // cell)
        np.testing.assert_allclose(got, ops.tile_mean(px, patch), rtol=1e-5, atol=1e-6)


def test_move_tiles_is_a_shift_with_the_border_repeated():
    rng = np.random.default_rng(0)
    maps = rng.random((6, 9, 2)).astype(np.float32)
    moved = move_tiles(maps, np.array([[1.0, 0.0, 2.0], [0.0, 1.0, 1.0]]))  # content moves 2 right, 1 down
    rows = np.clip(np.arange(6) - 1, 0, 5)
    cols = np.clip(np.arange(9) - 2, 0, 8)
    assert np.allclose(moved, maps[rows][:, cols])
    labels = rng.integers(0, 50, (6, 9)).astype(np.int32)
    moved = move_tiles(labels, np.array([[1.0, 0.0, 0.6], [0.0, 1.0, 0.0]]), nearest=True)
    assert moved.dtype == np.int32 and set(np.unique(moved)) <= set(np.unique(labels))


@pytest.mark.parametrize("seed", range(4))
def test_cover_tiles_covers_every_picked_tile_and_never_costs_more_than_its_start(seed):
    rng = np.random.default_rng(seed)
    pick = rng.random((23, 31)) < 0.04
    pick[5:9, 10:14] = True
    margin = 1.5
    rects = cover_tiles(pick, margin)
    covered = np.zeros_like(pick)
    for r0, c0, r1, c1 in rects:
        assert 0 <= r0 < r1 <= 23 and 0 <= c0 < c1 <= 31
        covered[r0:r1, c0:c1] = True
    assert covered[pick].all()
    start = cover_tiles(pick, margin, call_cost=-1e9)  # merging never pays: the 2x2-block components alone

    def cost(rs):
        return sum((r1 - r0 + 2 * margin) * (c1 - c0 + 2 * margin) + video_mod.CROP_CALL_TILES for r0, c0, r1, c1 in rs)

    assert cost(rects) <= cost(start)
    assert cover_tiles(np.zeros((4, 4), bool), margin) == []


def test_splatting_moves_content_and_uncovered_tiles_fade():
    gh, gw = 6, 8
    yy, xx = np.mgrid[0:gh, 0:gw].astype(np.float32)
    m = np.zeros((gh, gw), np.float32)
    m[2, 3] = 1.0
    assert np.array_equal(warp_tile_maps(splat_matrix(xx, yy), [m])[0], m)  # no motion: identity
    moved = np.where(xx >= 2, xx + 2, xx)  # from column 2 on, everything moves two tiles right
    out = warp_tile_maps(splat_matrix(moved, yy), [m, np.ones((gh, gw), np.float32)])
    assert out[0][2, 5] == 1.0 and out[0].sum() == 1.0
    assert np.all(out[1][:, 2:4] == 0) and np.all(out[1][:, [0, 1, 4, 5, 6, 7]] == 1)  # uncovered: no past
    both = warp_tile_maps(splat_matrix(np.where(xx == 3, 5.0, xx), yy), [m])[0]  # lands on a tile that stays
    assert both[2, 5] == 0.5 and both[2, 3] == 0.0  # two sources: averaged
    half = warp_tile_maps(splat_matrix(xx + 0.5, yy), [m])[0]  # half a tile: shared by two tiles
    assert half[2, 3] == pytest.approx(0.5) and half[2, 4] == pytest.approx(0.5)
