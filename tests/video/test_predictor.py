"""The session API and its memory: relevance follows optical flow, memory stays bounded, scene cuts and size changes
start new scenes, selection stability, many sessions and streams on one model, propagate."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import foveate.video as video_mod
from foveate import NoImageSetError, VideoError
from foveate.video import VideoPredictor
from foveate.video import predictor as video_predictor

from .common import assert_same_texture, moving_box, smooth_scene


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
    for _ in range(3):  # look elsewhere: the history fades
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
        keys = list(range(0, i + 1, 5))[-2:]
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
    results = list(
        pred.propagate(pred.init_state(), moving_box(3), {"text": "box", "boxes": [(40, 100, 104, 164)]}, 50)
    )
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


def test_video_config_is_validated():
    from foveate import ConfigError

    with pytest.raises(ConfigError, match="memory"):
        VideoPredictor(memory=0)
    with pytest.raises(ConfigError, match="on_size_change"):
        VideoPredictor().init_state(on_size_change="shrug")
    with pytest.raises(ConfigError, match="unknown option"):
        VideoPredictor(nonsense=1)


@pytest.mark.parametrize("update", ["exact", "motion"])
def test_streams_switch_with_the_shortest_memory(update):
    """memory=1 with a keyframe: once the frame's own record is the newest, the previous frame's saliency map is gone;
    switching streams keeps the frame's saliency channel (it belongs to no stream) instead of failing."""
    pred = VideoPredictor(preset="fast", device="cpu", update=update, memory=1, keyframes=1)
    st = pred.init_state()
    for f in moving_box(4):
        pred.add_frame(st, f)
        sal = st.temporal[..., 1].copy()
        pred.select(st, {"points": [(50, 50)]}, 30, stream="left")
        pred.select(st, {"points": [(330, 200)]}, 30, stream="right")
        np.testing.assert_array_equal(st.temporal[..., 1], sal)
        pred.select(st, None, 30, stream="left")
        np.testing.assert_array_equal(st.temporal[..., 1], sal)
