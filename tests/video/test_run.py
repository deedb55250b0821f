"""``run_video``: outputs are renamed into place only when the run completes; the overlay's frame rate."""

from __future__ import annotations

import math

import cv2
import pytest

from foveate.core.errors import ConfigError
from foveate.video import VideoPredictor, run_video
from foveate.video.run import DEFAULT_FPS, _overlay_fps, check_fps

from .common import moving_box


def _frames(folder, n):
    folder.mkdir()
    for i, f in enumerate(moving_box(n)):
        cv2.imwrite(str(folder / f"{i:03d}.png"), cv2.cvtColor(f, cv2.COLOR_RGB2BGR))
    return folder


def test_a_run_that_fails_midway_leaves_the_earlier_outputs(tmp_path):
    pred = VideoPredictor(preset="fast", device="cpu")
    frames = _frames(tmp_path / "frames", 3)
    out = tmp_path / "out"
    run_video(frames, None, out, predictor=pred, budget=64)
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def boom(res):
        if res.index == 1:
            raise KeyboardInterrupt  # an interrupt mid-stream, after a frame was written

    with pytest.raises(KeyboardInterrupt):
        run_video(frames, None, out, predictor=pred, budget=64, on_frame=boom)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_a_completed_run_replaces_the_outputs(tmp_path):
    pred = VideoPredictor(preset="fast", device="cpu")
    out = tmp_path / "out"
    run_video(_frames(tmp_path / "three", 3), None, out, predictor=pred, budget=64)
    s = run_video(_frames(tmp_path / "two", 2), None, out, predictor=pred, budget=64, overlay=False)
    assert s.frames == 2 and len((out / "stats.jsonl").read_text().splitlines()) == 2
    assert not [p for p in out.iterdir() if ".tmp" in p.name]


@pytest.mark.parametrize("fps", [-1.0, 0.0, math.nan, math.inf, 1e9])
def test_a_bad_fps_is_refused_before_any_work(tmp_path, fps):
    with pytest.raises(ConfigError, match="fps"):
        check_fps(fps)
    with pytest.raises(ConfigError, match="fps"):
        run_video(_frames(tmp_path / "one", 1), None, tmp_path / "out", predictor=VideoPredictor(device="cpu"), fps=fps)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("video_fps", [None, 0.0, -5.0, math.nan, math.inf, 1e9])
def test_a_nonsense_video_frame_rate_falls_back_to_24(video_fps):
    assert _overlay_fps(None, video_fps) == DEFAULT_FPS == 24.0


def test_the_given_or_the_video_frame_rate_is_used():
    assert _overlay_fps(12.5, 30.0) == 12.5 and _overlay_fps(None, 29.97) == 29.97
