"""Reading frames one at a time (an mp4, a folder of PNGs); bad sources are clear errors, a corrupt frame
mid-stream is skipped with a warning."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from foveate import VideoError
from foveate.video import FrameReader, FrameSkippedWarning

from .common import moving_box, write_mp4


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


@pytest.mark.parametrize(
    "make,needle",
    [
        (lambda p: p / "missing", "no such file or folder"),
        (lambda p: (p / "empty").mkdir() or p / "empty", "no image frames"),
        (lambda p: (p / "notes.txt").write_text("hello") and p / "notes.txt", "not a readable video"),
        (lambda p: (p / "fake.mp4").write_bytes(b"\x00" * 512) and p / "fake.mp4", "not a readable video"),
        (lambda p: (p / "zero.mp4").write_bytes(b"") or p / "zero.mp4", "empty"),
        (lambda p: cv2.imwrite(str(p / "one.png"), np.zeros((8, 8, 3), np.uint8)) and p / "one.png", "single image"),
    ],
)
def test_bad_sources_are_clear_errors(tmp_path, make, needle):
    with pytest.raises(VideoError, match=needle):
        FrameReader(make(tmp_path))
