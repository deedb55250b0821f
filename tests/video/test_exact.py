"""The exact incremental update equals encoding from scratch (every channel, level, mean and max), whatever the
threshold; the filter margins are needed; a static clip re-encodes nothing."""

from __future__ import annotations

import numpy as np
import pytest

from foveate.video import EDGES_MARGIN, FREQUENCY_MARGIN, UpdateRule, VideoPredictor
from foveate.video import config as video_config
from foveate.video import exact as video_exact
from foveate.video import motion as video_motion
from foveate.video import predictor as video_predictor

from .common import assert_same_texture, clip


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
    for f in frames:
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
