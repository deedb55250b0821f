"""Video: incremental updates equal encoding from scratch, memory stays bounded, relevance follows optical flow,
bad input is reported.  Clips are generated here (NumPy frames, an mp4 written by OpenCV, a folder of PNGs)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from scipy import ndimage

import foveate.video as video_mod
from foveate.video import config as video_config
from foveate.video import exact as video_exact
from foveate.video import motion as video_motion
from foveate.video import predictor as video_predictor
from foveate.video import tiles as video_tiles
from foveate import NoImageSetError, VideoError
from foveate.core import ops
from foveate.core.texture import compute_channels, encode_array
from foveate.video import (
    EDGES_MARGIN,
    FREQUENCY_MARGIN,
    FrameReader,
    FrameSkippedWarning,
    UpdateRule,
    VideoPredictor,
    cells_to_tiles,
    cover_tiles,
    dilate_tiles,
    fixation_map,
    move_tiles,
    plan_crops,
    register,
    tile_change,
    splat_matrix,
    update_mips,
    warp_tile_maps,
)

CPU = torch.device("cpu")


def background(h: int, w: int, seed: int = 0, block: int = 4) -> np.ndarray:
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 256, (h // block + 1, w // block + 1, 3), dtype=np.uint8)
    return np.ascontiguousarray(np.repeat(np.repeat(base, block, 0), block, 1)[:h, :w])


def clip(n: int = 12, h: int = 200, w: int = 330) -> list[np.ndarray]:
    """A moving red box on a textured background (sizes not multiples of 16: partial border tiles), a one-pixel
    change far away, a chroma-only change, a small global brightness step, and a scene cut and back."""
    bg = background(h, w)
    frames = []
    for t in range(n):
        f = bg.copy()
        x = 12 + 9 * t
        f[50:80, x : x + 24] = (250, 30, 30)
        if t >= 3:
            f[150, 300] = (0, 0, 0)  # one pixel, far from the box
        if t == 5:
            f[10:30, 200:240] = f[10:30, 200:240, ::-1]  # colours swapped: same layout, other chroma
        if t == 7:
            f = np.clip(f.astype(np.int16) + 3, 0, 255).astype(np.uint8)
        if t == 9:
            f = np.ascontiguousarray(f[::-1, ::-1])  # a cut ...
        frames.append(f)  # ... and back at t == 10
    return frames


def from_scratch(state):
    """The texture encode_array makes of the session's reference and inputs, and its float32 masters."""
    inputs = state.encode_inputs()
    tex = encode_array(state.reference, state.encode_config, CPU, frame=inputs)
    x0, _, _, _, _ = compute_channels(state.reference, state.encode_config, inputs)
    h, w = state.reference.shape[:2]
    means, maxes, _ = ops.build_mips(x0, ops.coverage0(h, w, state.encode_config.patch_size), tex.num_levels)
    return tex, means, maxes


def assert_same_texture(state, atol32: float = 1e-5):
    tex, means, maxes = from_scratch(state)
    got = state.texture
    assert got.channels == tex.channels and got.level_shapes == tex.level_shapes and got.absent == tex.absent
    for lvl in range(tex.num_levels):  # every channel, every level, mean and max
        for kind, a, b in (("mean", got.mean[lvl], tex.mean[lvl]), ("max", got.max[lvl], tex.max[lvl])):
            diff = (a.float() - b.float()).abs()
            worst = tuple(int(v) for v in torch.nonzero(diff == diff.max())[0])
            assert float(diff.max()) <= 1e-3, (lvl, kind, tex.channels[worst[-1]], worst, float(diff.max()))
        assert np.abs(state._means[lvl] - means[lvl]).max() <= atol32
        assert np.abs(state._maxes[lvl] - maxes[lvl]).max() <= atol32


# ----------------------------------------------------------------------------------------------------------
# Exactness


@pytest.mark.parametrize("preset,patch", [("fast", 16), ("full", 16), ("default", 8)])
def test_threshold_zero_equals_encoding_every_frame_from_scratch(preset, patch):
    pred = VideoPredictor(preset=preset, patch_size=patch, device="cpu")
    state = pred.init_state(change_threshold=0.0, keyframe_interval=4, full_frame_share=1.0, stability=0.5)
    partial = 0
    for i, frame in enumerate(clip()):
        stats = pred.add_frame(state, frame)
        assert np.array_equal(state.reference, frame)  # threshold 0: the reference is the frame
        assert_same_texture(state)
        partial += 0 < stats.reencoded_share < 1
        # selections feed the temporal channels of the next frame; a second stream switches them in place
        pred.select(state, {"points": [(60, 60)]} if i == 0 else None, 60, mode="topk" if i % 2 else "quadtree")
        if i in (2, 6):
            pred.select(state, {"boxes": [(150, 20, 300, 120)]}, 40, stream="other")
            assert_same_texture(state)
    assert partial >= 4  # the crop path ran, not only full refreshes
    assert state.last_stats.index == 11


def test_the_invariant_holds_for_any_threshold():
    frames = clip()
    rng = np.random.default_rng(3)
    pred = VideoPredictor(preset="full", device="cpu")
    state = pred.init_state(change_threshold=5.0, keyframe_interval=6, update="exact")
    held = 0
    for i, f in enumerate(frames):
        noisy = np.clip(f.astype(np.int16) + rng.integers(-2, 3, f.shape), 0, 255).astype(np.uint8)
        stats = pred.add_frame(state, noisy)
        assert_same_texture(state)  # the texture is the encode of the reference, whatever the threshold
        held += not np.array_equal(state.reference, noisy)
        if stats.reason == "interval":
            assert np.array_equal(state.reference, noisy)  # a keyframe refreshes to the frame itself
        pred.select(state, None, 80)
    assert held >= 5  # sub-threshold noise was not re-encoded


def test_a_static_clip_reencodes_nothing_after_the_first_frame(monkeypatch):
    calls = []
    real = video_predictor.run_groups

    def counting(ctx, names, generators=None):
        calls.append(names)
        return real(ctx, names, generators)

    for mod in (video_predictor, video_exact, video_motion):  # the modules that run channel generators
        monkeypatch.setattr(mod, "run_groups", counting)
    frame = clip(1)[0]
    pred = VideoPredictor(preset="default", device="cpu")
    state = pred.init_state(change_threshold=0.0, keyframe_interval=5)
    for i in range(12):
        stats = pred.add_frame(state, frame.copy())
        pred.select(state, None, 50)
        if i == 0:
            calls.clear()
            continue
        assert stats.changed_share == 0 and stats.reencoded_share == 0 and stats.crops == 0
    assert calls == []  # no channel generator ran, keyframes at 5 and 10 included
    assert_same_texture(state)


@pytest.mark.parametrize("group,margin,short", [("frequency", FREQUENCY_MARGIN, 12), ("edges", EDGES_MARGIN, 4)])
def test_the_margins_are_needed(monkeypatch, group, margin, short):
    """With 4 px tiles a margin of m px is ceil(m / 4) tiles.  A margin that cuts into a filter's support is caught by
    the exactness check: frequency at 12 px (its Gaussians reach 20), edges at 4 px (the 15 px box std reaches 7; the
    surround Gaussian's outer part only flips the polarity where centre and surround are equal, rarely visible)."""
    assert (EDGES_MARGIN, FREQUENCY_MARGIN) == (17, 20)
    frames = clip(4)
    monkeypatch.setitem(video_config.UPDATE_RULES, group, UpdateRule("local", short))
    pred = VideoPredictor(preset="fast", patch_size=4, device="cpu")
    state = pred.init_state(change_threshold=0.0, full_frame_share=1.0)
    for f in frames[:2]:
        pred.add_frame(state, f)
    with pytest.raises(AssertionError):
        assert_same_texture(state, atol32=1e-4)
    monkeypatch.setitem(video_config.UPDATE_RULES, group, UpdateRule("local", margin))
    state = pred.init_state(change_threshold=0.0, full_frame_share=1.0)
    for f in frames:
        pred.add_frame(state, f)
        assert_same_texture(state)


def test_without_neighbour_refresh_it_is_cheaper_and_close():
    frames = clip(6)
    pred = VideoPredictor(preset="fast", device="cpu")
    exact = pred.init_state(change_threshold=0.0, full_frame_share=1.0)
    cheap = pred.init_state(change_threshold=0.0, full_frame_share=1.0, refresh_neighbours=False)
    for f in frames:
        a, b = pred.add_frame(exact, f), pred.add_frame(cheap, f)
    assert b.reencoded_share < a.reencoded_share
    diff = np.abs(cheap._means[0] - exact._means[0])
    assert 0 < diff.max() and diff.mean() < 0.01


def test_incremental_and_scratch_sessions_give_the_same_selection():
    pred = VideoPredictor(preset="fast", device="cpu")
    inc, scratch = pred.init_state(change_threshold=0.0), pred.init_state(incremental=False)
    for i, f in enumerate(clip(8)):
        pred.add_frame(inc, f)
        ss = pred.add_frame(scratch, f)
        assert ss.reencoded_share == 1.0
        q = {"boxes": [(10, 40, 120, 100)]} if i == 0 else None
        a, b = pred.select(inc, q, 100), pred.select(scratch, q, 100)
        assert np.array_equal(a.levels, b.levels) and np.array_equal(a.rows, b.rows) and np.array_equal(a.cols, b.cols)


# ----------------------------------------------------------------------------------------------------------
# Pure helpers against references


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


# ----------------------------------------------------------------------------------------------------------
# Motion compensation (the default update)


def smooth_texture(h: int, w: int, seed: int = 0) -> np.ndarray:
    """(h, w, 3) uint8: blurred noise with structure at several scales (registration needs gradients)."""
    rng = np.random.default_rng(seed)
    img = np.zeros((h, w, 3), np.float32)
    for sigma, amp in ((1.5, 60.0), (4.0, 90.0), (12.0, 120.0)):
        img += cv2.GaussianBlur(rng.normal(0, 1, (h, w, 3)).astype(np.float32), (0, 0), sigma) * amp
    return np.clip(img + 128, 0, 255).astype(np.uint8)


def panned_clip(n: int, h: int = 208, w: int = 304, step: tuple[float, float] = (2.5, 1.25)) -> list[np.ndarray]:
    """A camera panning over a larger picture by ``step`` px per frame (sub-pixel: bilinear resampling)."""
    scene = smooth_texture(h + 80, w + 80)
    out = []
    for t in range(n):
        m = np.array([[1.0, 0.0, -(20 + step[0] * t)], [0.0, 1.0, -(20 + step[1] * t)]])
        out.append(cv2.warpAffine(scene, m, (w, h), flags=cv2.INTER_LINEAR))
    return out


def test_register_recovers_a_known_similarity_transform():
    grey = cv2.cvtColor(smooth_texture(90, 120, seed=4), cv2.COLOR_RGB2GRAY).astype(np.float32)
    head = np.dstack([np.ones_like(grey), grey])
    angle, scale, shift = math.radians(1.5), 1.02, (1.7, -0.8)
    cy, cx = 45.0, 60.0
    truth = cv2.getRotationMatrix2D((cx, cy), math.degrees(angle), scale)
    truth[:, 2] += shift  # frame cell coordinates -> canvas coordinates
    frame = cv2.warpAffine(grey, truth, (120, 90), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP)
    identity = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    got = register(head, frame[10:-10, 10:-10], then_shift(identity, 10.0), iterations=8, step=1)
    want = then_shift(truth, 10.0)
    ys, xs = np.mgrid[0:70:10, 0:100:10]
    pts = np.stack([xs.ravel(), ys.ravel(), np.ones(xs.size)])
    assert np.abs(got @ pts - want @ pts).max() < 0.1  # cells, over the whole frame


def then_shift(m: np.ndarray, d: float) -> np.ndarray:
    """``m`` for a frame cropped by ``d`` cells on the top and left."""
    return np.hstack([m[:, :2], (m[:, 2] + m[:, :2] @ np.array([d, d]))[:, None]])


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


def test_motion_compensation_follows_a_panning_camera():
    frames = panned_clip(10)
    pred = VideoPredictor(preset="fast", device="cpu")
    moving = pred.init_state(keyframe_interval=100)
    assert moving.config.motion_compensated and moving.config.threshold == 8.0
    first = None
    for i, f in enumerate(frames):
        st = pred.add_frame(moving, f)
        if i == 0:
            assert st.keyframe and st.camera is None
            first = encode_array(f, moving.encode_config, CPU)
            continue
        assert not st.keyframe and abs(st.camera["scale"] - 1.0) < 0.01 and abs(st.camera["rotation"]) < 0.5
        # the camera since the keyframe (content moves by -step px per frame): anchored, so no drift
        since_key = video_motion._camera_stats(moving._camera, moving._layout.grid, 16)
        assert abs(since_key["dx"] + 2.5 * i) < 0.5 and abs(since_key["dy"] + 1.25 * i) < 0.5, (i, since_key)
        assert st.reencoded_share <= moving.config.reencode_budget + 1e-9
    truth = encode_array(frames[-1], moving.encode_config, CPU)
    names = [c for c in truth.channels if c not in ("prev_relevance", "prev_saliency", "fixations", "motion")]
    idx = [truth.channels.index(c) for c in names]
    got, want, old = (t.mean[0][..., idx].float() for t in (moving.texture, truth, first))
    err, unmoved = float((got - want).abs().mean()), float((old - want).abs().mean())
    assert err < 0.02 and err < unmoved / 3, (err, unmoved)  # close to the frame's own encode; not the stale one


def test_motion_compensation_reencodes_what_the_camera_does_not_explain():
    """An object moving against the panning background is where the re-encoding goes; the budget caps it."""
    frames = panned_clip(6)
    for t, f in enumerate(frames):
        f[60:110, 40 + 12 * t : 90 + 12 * t] = (240, 20, 20)
    pred = VideoPredictor(preset="fast", device="cpu")
    roomy, default = pred.init_state(keyframe_interval=100, reencode_budget=0.6), pred.init_state(keyframe_interval=100)
    for f in frames:
        st = pred.add_frame(roomy, f)
        sd = pred.add_frame(default, f)
        assert not st.keyframe or st.index == 0
        assert sd.index == 0 or sd.reencoded_share <= default.config.reencode_budget + 1e-9  # here: ~one tile
    truth = encode_array(frames[-1], roomy.encode_config, CPU)
    r = truth.channels.index("r")
    now = (slice(4, 6), slice(7, 9))  # tiles inside the object on the last frame (x 100-150, y 60-110)
    then_ = (slice(4, 6), slice(3, 5))  # inside where it was on the keyframe (x 40-90) moved by the camera (-12 px)
    for box in (now, then_):
        assert torch.allclose(roomy.texture.mean[0][box + (r,)].float(), truth.mean[0][box + (r,)].float(), atol=0.03)
    assert 0 < st.reencoded_share < 0.6


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


# ----------------------------------------------------------------------------------------------------------
# Memory and the temporal channels


def moving_box(n: int, step: int = 8, h: int = 256, w: int = 384):
    bg = background(h, w, seed=5, block=8)
    out = []
    for t in range(n):
        f = bg.copy()
        x = 40 + step * t
        f[100:164, x : x + 64] = background(64, 64, seed=9, block=4)  # a textured box flow can follow
        out.append(f)
    return out


def smooth_scene(n: int, step: int, h: int = 256, w: int = 384) -> list[np.ndarray]:
    """A patterned 64x64 object moving ``step`` px right per frame over a smooth background (structure at several
    scales, as in real video: optical flow can follow it)."""
    rng = np.random.default_rng(5)
    bg = cv2.resize(rng.integers(0, 256, (h // 16, w // 16, 3), dtype=np.uint8), (w, h), interpolation=cv2.INTER_NEAREST)
    bg = cv2.GaussianBlur(bg, (0, 0), 3)
    yy, xx = np.mgrid[0:64, 0:64]
    obj = np.stack([128 + 100 * np.sin(xx / 5.0) * np.cos(yy / 7.0), 60 + 80 * ((xx // 16 + yy // 16) % 2),
                    200 - 2 * yy], -1).clip(0, 255).astype(np.uint8)
    out = []
    for t in range(n):
        f = bg.copy()
        f[96:160, 32 + step * t : 96 + step * t] = obj
        out.append(f)
    return out


def test_prev_relevance_is_moved_by_optical_flow():
    """Prompt the object's box on every frame: the next frame's prev_relevance (last frame's relevance, moved by the
    flow) covers the column the object just entered and leaves the one it uncovered; without flow, the reverse."""
    step = 16  # one tile per frame
    pred = VideoPredictor(preset="fast", device="cpu")
    moving = pred.init_state(memory=1, keyframes=0)
    still = pred.init_state(memory=1, keyframes=0, flow_size=None)
    for i, f in enumerate(smooth_scene(5, step)):
        for state in (moving, still):
            pred.add_frame(state, f)
            if i >= 2:
                rel = state.temporal[6:10, :, 0].mean(axis=0)  # the object's tile rows
                entered, left = (96 + step * i) // 16 - 1, (32 + step * (i - 1)) // 16
                if state is moving:
                    assert rel[entered] > 0.3 and rel[left] < 0.15, (i, rel)
                else:
                    assert rel[entered] < 0.05 and rel[left] > 0.5, (i, rel)
            pred.select(state, {"boxes": [(32 + step * i, 96, 96 + step * i, 160)]}, 40, mode="topk", gist=False)


def test_a_prompt_on_the_first_frame_lives_on_in_the_memory():
    pred = VideoPredictor(preset="fast", device="cpu")
    state = pred.init_state()
    frames = smooth_scene(4, 8)
    for i, f in enumerate(frames):
        pred.add_frame(state, f)
        if i:
            rel = state.temporal[..., 0]
            r, c = np.unravel_index(np.argmax(rel), rel.shape)
            assert 6 <= r <= 9 and 2 <= c <= (96 + 8 * i) // 16  # still on the object, never prompted again
        pred.select(state, {"boxes": [(32, 96, 96, 160)]} if i == 0 else None, 40, mode="topk", gist=False)


def test_fixations_are_a_decayed_sum_over_the_memory():
    frame = moving_box(1)[0]
    pred = VideoPredictor(preset="fast", device="cpu")
    state = pred.init_state(memory=4, keyframes=0, decay=0.5)
    norm = sum(0.5**j for j in range(4))
    for t in range(7):
        pred.add_frame(state, frame)
        expect = sum(0.5**j for j in range(min(t, 4))) / norm
        assert state.temporal[2, 3, 2] == pytest.approx(expect, abs=1e-6)  # tile (2, 3) chosen on every frame
        pred.select(state, {"points": [(56, 40)]}, 3, mode="topk", gist=False)
    for t in range(3):  # look elsewhere: the history fades
        pred.add_frame(state, frame)
        pred.select(state, {"points": [(300, 200)]}, 3, mode="topk", gist=False)
    assert state.temporal[2, 3, 2] == pytest.approx((0.5**2 + 0.5**3) / norm, abs=1e-6)


def test_memory_is_bounded_fifo_plus_keyframes():
    frames = moving_box(30, step=4)
    pred = VideoPredictor(preset="fast", device="cpu")
    state = pred.init_state(memory=3, keyframes=2, keyframe_interval=5)
    for i, f in enumerate(frames):
        stats = pred.add_frame(state, f)
        assert stats.keyframe == (i % 5 == 0)
        recent = list(range(max(0, i - 2), i + 1))
        keys = [k for k in range(0, i + 1, 5)][-2:]
        assert state.memory_frames == sorted(set(recent + keys))


def test_a_scene_cut_clears_the_memory_and_refreshes():
    frames = moving_box(4)
    cut = np.ascontiguousarray(255 - frames[-1][::-1])
    pred = VideoPredictor(preset="fast", device="cpu")
    state = pred.init_state()
    for f in frames:
        pred.add_frame(state, f)
        pred.select(state, {"points": [(60, 120)]}, 20)
    assert state.temporal[..., 0].max() > 0.5
    stats = pred.add_frame(state, cut)
    assert stats.keyframe and stats.reason == "scene_cut" and stats.reencoded_share == 1.0
    assert state.memory_frames == [4] and state.temporal.max() == 0.0 and state.streams == []
    assert_same_texture(state)


def test_a_frame_of_another_size_starts_a_keyframe_or_raises():
    a, b = moving_box(1)[0], moving_box(1, h=200, w=300)[0]
    pred = VideoPredictor(preset="fast", device="cpu")
    state = pred.init_state()
    pred.add_frame(state, a)
    stats = pred.add_frame(state, b)
    assert stats.reason == "size_change" and state.texture.image_size == (200, 300)
    assert_same_texture(state)
    strict = pred.init_state(on_size_change="error")
    pred.add_frame(strict, a)
    with pytest.raises(VideoError, match="300x200 but the session's frames are 384x256"):
        pred.add_frame(strict, b)


def test_stability_keeps_tiles_unless_beaten_by_the_margin():
    frame = moving_box(1)[0]
    points = [{"points": [(60, 60)]}, {"points": [(100, 60)]}]  # two places, equally relevant in turn

    def kept(stability: float, mode: str) -> float:
        pred = VideoPredictor(preset="fast", device="cpu", stability=stability)
        state = pred.init_state()
        prev, shares = None, []
        for t in range(6):
            pred.add_frame(state, frame)
            sel = pred.select(state, points[t % 2], 6 if mode == "topk" else 40, mode=mode, gist=False)
            if prev is not None:
                shares.append(video_mod.token_overlap(prev, sel))
            prev = sel
        return float(np.mean(shares))

    for mode in ("topk", "quadtree"):
        assert kept(0.0, mode) < 0.9
        assert kept(0.5, mode) < 0.9  # the new place wins by more than the margin
        assert kept(20.0, mode) == 1.0  # ... but not by 20


def test_the_stability_scorer_keeps_the_scorer_contract(photo_texture):
    from foveate.query.scorer import default_scorer

    feats, _ = photo_texture.flat_features()
    base = default_scorer(photo_texture.channels, feats.device)
    rng = np.random.default_rng(0)
    bonus, bound_bonus = (rng.random(feats.shape[0]).astype(np.float32) for _ in range(2))
    wrapped = video_predictor._StableScorer(base, bonus, bound_bonus)
    score, need, bound = wrapped.evaluate(feats)
    s0, n0, b0 = base.evaluate(feats)
    np.testing.assert_allclose(score, s0 + bonus, atol=1e-5) and np.testing.assert_array_equal(need, n0)
    np.testing.assert_allclose(bound, b0 + bound_bonus, atol=1e-5)
    with torch.inference_mode():
        fs, fn = wrapped(feats)
        np.testing.assert_allclose(fs.numpy(), score, atol=1e-4)
        np.testing.assert_allclose(wrapped.bound(feats).numpy(), bound, atol=1e-4)


def test_one_model_many_sessions_and_streams():
    frames = moving_box(5)
    pred = VideoPredictor(preset="fast", device="cpu", max_streams=2, update="exact")
    a, b = pred.init_state(), pred.init_state()
    alone = pred.init_state()
    for f in frames:
        pred.add_frame(a, f)
        pred.add_frame(b, f[::-1].copy())
        pred.add_frame(alone, f)
        for st in (a, alone):
            pred.select(st, {"points": [(50, 50)]}, 30, stream="left")
            pred.select(st, {"points": [(330, 200)]}, 30, stream="right")
        pred.select(b, None, 30)
    for x, y in zip(a.texture.mean, alone.texture.mean):
        assert torch.equal(x, y)  # sessions do not share state
    left = pred.select(a, None, 30, stream="left")
    t_left = a.temporal.copy()
    assert_same_texture(a)
    pred.select(a, None, 30, stream="right")
    assert not np.array_equal(a.temporal, t_left) and left is not None
    assert_same_texture(a)
    pred.select(a, None, 30, stream="third")
    assert a.streams == ["right", "third"]  # the least recently used stream is forgotten


def test_select_before_a_frame_is_a_clear_error():
    pred = VideoPredictor(device="cpu")
    with pytest.raises(NoImageSetError, match="add_frame"):
        pred.select(pred.init_state(), "anything")


def test_propagate_prompts_the_first_frame_only():
    pred = VideoPredictor(preset="fast", device="cpu")
    results = list(pred.propagate(pred.init_state(), moving_box(3), {"text": "box", "boxes": [(40, 100, 104, 164)]},
                                  50))
    assert [r.index for r in results] == [0, 1, 2] and results[0].kept_share is None
    assert results[0].selection.query.boxes and not results[1].selection.query.boxes
    assert results[1].selection.query.text == "box"


def test_a_new_scene_forgets_and_propagate_keeps_no_tokens_across_it():
    frames = moving_box(3)
    cut = np.ascontiguousarray(255 - frames[-1][::-1])
    resized = moving_box(2, h=200, w=300)
    pred = VideoPredictor(preset="fast", device="cpu")
    state = pred.init_state()
    results = list(pred.propagate(state, frames + [cut] + resized, "box", 30))
    reasons = [r.stats.reason for r in results]
    assert reasons == ["first", "", "", "scene_cut", "size_change", ""]
    assert [r.stats.new_scene for r in results] == [True, False, False, True, True, False]
    assert [r.kept_share is None for r in results] == [True, False, False, True, True, False]
    assert state.memory_frames == [4, 5] and state.streams == ["main"]


# ----------------------------------------------------------------------------------------------------------
# Reading frames, bad input


def write_mp4(path: Path, frames: list[np.ndarray], fps: float = 10.0) -> Path:
    h, w = frames[0].shape[:2]
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), fps, (w, h))
    assert writer.isOpened()
    for f in frames:
        writer.write(cv2.cvtColor(f, cv2.COLOR_RGB2BGR))
    writer.release()
    return path


def test_reads_an_mp4_one_frame_at_a_time(tmp_path):
    frames = moving_box(6)
    reader = FrameReader(write_mp4(tmp_path / "clip.mp4", frames))
    assert reader.kind == "video" and reader.count == 6 and reader.fps == pytest.approx(10.0)
    got = list(reader)
    assert [f.index for f in got] == list(range(6)) and got[0].image.shape == (256, 384, 3)
    assert np.abs(got[3].image.astype(float) - frames[3]).mean() < 12  # lossy, but the same picture
    with pytest.raises(VideoError, match="already consumed"):
        list(reader)


def test_a_corrupt_frame_mid_stream_is_skipped_with_a_warning(tmp_path):
    for i, f in enumerate(moving_box(5)):
        cv2.imwrite(str(tmp_path / f"frame{i}.png"), cv2.cvtColor(f, cv2.COLOR_RGB2BGR))
    (tmp_path / "frame2.png").write_bytes((tmp_path / "frame2.png").read_bytes()[:200])  # truncated
    (tmp_path / "frame10.png").write_bytes((tmp_path / "frame4.png").read_bytes())  # numeric order, not text
    (tmp_path / "notes.txt").write_text("not a frame")
    reader = FrameReader(tmp_path)
    with pytest.warns(FrameSkippedWarning, match="frame2.png"):
        got = [f.name for f in reader]
    assert got == ["frame0.png", "frame1.png", "frame3.png", "frame4.png", "frame10.png"]
    assert reader.skipped == ["frame2.png"]


@pytest.mark.parametrize("make,needle", [
    (lambda p: p / "missing", "no such file or folder"),
    (lambda p: (p / "empty").mkdir() or p / "empty", "no image frames"),
    (lambda p: (p / "notes.txt").write_text("hello") and p / "notes.txt", "not a readable video"),
    (lambda p: (p / "fake.mp4").write_bytes(b"\x00" * 512) and p / "fake.mp4", "not a readable video"),
    (lambda p: (p / "zero.mp4").write_bytes(b"") or p / "zero.mp4", "empty"),
    (lambda p: cv2.imwrite(str(p / "one.png"), np.zeros((8, 8, 3), np.uint8)) and p / "one.png", "single image"),
])
def test_bad_sources_are_clear_errors(tmp_path, make, needle):
    with pytest.raises(VideoError, match=needle):
        FrameReader(make(tmp_path))


def test_video_config_is_validated():
    from foveate import ConfigError

    with pytest.raises(ConfigError, match="memory"):
        VideoPredictor(memory=0)
    with pytest.raises(ConfigError, match="on_size_change"):
        VideoPredictor().init_state(on_size_change="shrug")
    with pytest.raises(ConfigError, match="unknown option"):
        VideoPredictor(nonsense=1)


# ----------------------------------------------------------------------------------------------------------
# The command


def run_cli(*args, cwd=None):
    exe = Path(sys.executable).parent / "foveate"
    cmd = [str(exe), *map(str, args)] if exe.exists() else [sys.executable, "-m", "foveate.cli", *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=300,
                          env={**os.environ, "COLUMNS": "200"})


def test_cli_video_writes_selections_stats_and_an_overlay(tmp_path):
    frames_dir = tmp_path / "frames"
    frames_dir.mkdir()
    for i, f in enumerate(moving_box(6)):
        cv2.imwrite(str(frames_dir / f"{i:03d}.png"), cv2.cvtColor(f, cv2.COLOR_RGB2BGR))
    (frames_dir / "003.png").write_bytes(b"\x89PNG\r\n\x1a\n broken")
    r = run_cli("video", frames_dir, "--box", "40,100,104,164", "-b", "64", "-o", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    assert "warning: " in r.stderr and "003.png" in r.stderr and "Traceback" not in r.stderr
    lines = (tmp_path / "out" / "selections.jsonl").read_text().splitlines()
    docs = [json.loads(s) for s in lines]
    assert len(docs) == 5 and all(d["num_tokens"] <= 64 for d in docs)
    assert docs[0]["query"]["boxes"] and not docs[1]["query"].get("boxes")
    stats = [json.loads(s) for s in (tmp_path / "out" / "stats.jsonl").read_text().splitlines()]
    assert [s["source"] for s in stats] == ["000.png", "001.png", "002.png", "004.png", "005.png"]
    assert stats[0]["keyframe"] and not stats[1]["keyframe"] and 0 <= stats[1]["reencoded_share"] <= 1
    cap = cv2.VideoCapture(str(tmp_path / "out" / "overlay.mp4"))
    assert cap.get(cv2.CAP_PROP_FRAME_COUNT) == 5


def test_cli_video_mp4_without_overlay(tmp_path):
    src = write_mp4(tmp_path / "clip.mp4", moving_box(4))
    r = run_cli("video", src, "-q", "the box", "--no-overlay", "--max-frames", "3", "-o", tmp_path / "o")
    assert r.returncode == 0, r.stderr
    assert len((tmp_path / "o" / "stats.jsonl").read_text().splitlines()) == 3
    assert not (tmp_path / "o" / "overlay.mp4").exists()
    assert "query text is not used" in r.stderr  # said, not silently ignored


@pytest.mark.parametrize("arg,needle", [("empty", "no image frames"), ("notes.txt", "not a readable video"),
                                        ("fake.mp4", "not a readable video")])
def test_cli_video_bad_input_is_one_line(tmp_path, arg, needle):
    (tmp_path / "empty").mkdir()
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "fake.mp4").write_bytes(os.urandom(2048))
    r = run_cli("video", arg, cwd=tmp_path)
    assert r.returncode == 1 and needle in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_generated_stream_is_cheap_to_make():
    from foveate.bench.video import generated_frame

    a, b = generated_frame(0), generated_frame(1)
    assert a.shape == (480, 640, 3) and a.dtype == np.uint8 and not np.array_equal(a, b)
    assert np.array_equal(generated_frame(7), generated_frame(7))
    assert not math.isclose(float(generated_frame(0).mean()), float(generated_frame(600).mean()), abs_tol=0.5)


# ----------------------------------------------------------------------------------------------------------
# The benchmark and evaluation commands' functions (tiny generated inputs; figures come from the real commands)


def test_eval_boxes_compares_incremental_with_scratch_on_generated_sequences(tmp_path):
    from rich.console import Console

    from foveate.eval.video import eval_boxes

    lines = []
    for seq, step in (("left", 8), ("right", -8)):
        (tmp_path / seq).mkdir()
        for i, f in enumerate(smooth_scene(4, step) if step > 0 else smooth_scene(4, 8)[::-1]):
            cv2.imwrite(str(tmp_path / seq / f"{i}.png"), cv2.cvtColor(f, cv2.COLOR_RGB2BGR))
            x = 32 + 8 * (i if step > 0 else 3 - i)
            lines.append({"image": f"{seq}/{i}.png", "boxes": [[x, 96, x + 64, 160]], "sequence": seq,
                          "frame_index": i, "query": "the object"})
    (tmp_path / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in lines))
    res = eval_boxes(tmp_path, budget=20, approximate=(8.0,), console=Console(file=open(os.devnull, "w")),
                     json_path=tmp_path / "r.json")
    rows = {(r["protocol"], r["sequence"], r["session"]): r for r in res["rows"]}
    assert len(rows) == 3 * 3 * 2  # protocols x (2 sequences + all) x (incremental, approx t=8)
    assert rows[("prev-box", "all", "incremental")]["frames"] == 8
    assert all(0 <= r["coverage"] <= 1 and 0 < r["reencoded_share"] <= 1 for r in res["rows"])
    assert json.loads((tmp_path / "r.json").read_text())["rows"]


def test_bench_functions_run_on_generated_frames(tmp_path):
    from rich.console import Console

    from foveate.bench.video import bench_clip, bench_memory, generated_frame

    quiet = Console(file=open(os.devnull, "w"))
    res = bench_clip((generated_frame(i, (128, 160), drift=False) for i in range(5)), thresholds=(0.0, 8.0),
                     approximate=(4.0,), reencode_budgets=(0.2,), budget=30, console=quiet, label="tiny")
    names = [r["session"] for r in res["sessions"]]
    assert names == ["scratch", "exact t=0", "motion t=8", "approx t=4", "motion budget=0.2"] and res["frames"] == 5
    assert res["sessions"][1]["token_agreement"] == 1.0 and res["sessions"][1]["feature_mae"] < 1e-3
    mem = bench_memory(8, size=(96, 128), console=quiet, json_path=tmp_path / "m.json")
    assert mem["samples"][-1]["frame"] == 7 and mem["samples"][-1]["memory_frames"] <= 6 + 2
