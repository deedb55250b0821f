"""``foveate video`` end to end: selections, statistics and an overlay; bad input is one line."""

from __future__ import annotations

import json
import os

import cv2
import pytest

from ..video.common import moving_box, write_mp4
from .common import run


def test_cli_video_writes_selections_stats_and_an_overlay(tmp_path):
    frames_dir = tmp_path / "frames"
    frames_dir.mkdir()
    for i, f in enumerate(moving_box(6)):
        cv2.imwrite(str(frames_dir / f"{i:03d}.png"), cv2.cvtColor(f, cv2.COLOR_RGB2BGR))
    (frames_dir / "003.png").write_bytes(b"\x89PNG\r\n\x1a\n broken")
    r = run("video", frames_dir, "--box", "40,100,104,164", "-b", "64", "-o", tmp_path / "out")
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
    r = run("video", src, "-q", "the box", "--no-overlay", "--max-frames", "3", "--json", "-o", tmp_path / "o")
    assert r.returncode == 0, r.stderr
    assert len((tmp_path / "o" / "stats.jsonl").read_text().splitlines()) == 3
    assert json.loads(r.stdout)["frames"] == 3  # --json: the summary instead of the table
    assert not (tmp_path / "o" / "overlay.mp4").exists()
    assert "query text is not used" in r.stderr  # said, not silently ignored


@pytest.mark.parametrize(
    "arg,needle",
    [("empty", "no image frames"), ("notes.txt", "not a readable video"), ("fake.mp4", "not a readable video")],
)
def test_cli_video_bad_input_is_one_line(tmp_path, arg, needle):
    (tmp_path / "empty").mkdir()
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "fake.mp4").write_bytes(os.urandom(2048))
    r = run("video", arg, cwd=tmp_path)
    assert r.returncode == 1 and needle in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
