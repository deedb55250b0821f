"""``foveate video`` bad input: a bad ``--fps`` is a quick one-line usage error, and a failed run into an earlier
run's folder leaves that run's files as they were; a run that succeeds leaves none of them that would contradict it."""

from __future__ import annotations

import time

import cv2
import pytest

from ..video.common import moving_box
from .common import run


def _frames(folder):
    folder.mkdir()
    for i, f in enumerate(moving_box(3)):
        cv2.imwrite(str(folder / f"{i:03d}.png"), cv2.cvtColor(f, cv2.COLOR_RGB2BGR))
    return folder


def _contents(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("fps", ["-1", "nan", "inf", "0", "1e9"])
def test_cli_video_a_bad_fps_is_a_quick_usage_error(tmp_path, fps):
    frames = _frames(tmp_path / "frames")
    start = time.monotonic()
    r = run("video", frames, "-q", "the box", "-o", tmp_path / "out", f"--fps={fps}")
    assert time.monotonic() - start < 60  # `--fps inf` used to hang
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("usage error: ") and "--fps" in lines[0]
    assert "Traceback" not in r.stderr and "encoder" not in r.stderr and "cap_ffmpeg" not in r.stderr
    assert not (tmp_path / "out").exists()  # checked before any work


@pytest.mark.parametrize("second", [["--fps", "-1"], ["--fps", "inf"], ["BROKEN"]], ids=["fps-1", "fps-inf", "broken"])
def test_cli_video_a_failed_run_leaves_the_earlier_outputs(tmp_path, second):
    frames = _frames(tmp_path / "frames")
    broken = tmp_path / "broken"
    broken.mkdir()
    for name in ("000.png", "001.png"):  # every frame undecodable: fails after the outputs are opened
        (broken / name).write_bytes(b"\x89PNG\r\n\x1a\n broken")
    out = tmp_path / "out"
    r = run("video", frames, "-q", "the box", "-o", out)
    assert r.returncode == 0, r.stderr
    before = _contents(out)
    assert set(before) == {"selections.jsonl", "stats.jsonl", "overlay.mp4"}
    args = [broken] if second == ["BROKEN"] else [frames, *second]
    r = run("video", *args, "-q", "the box", "-o", out)
    assert r.returncode in (1, 2) and "Traceback" not in r.stderr
    assert _contents(out) == before  # byte-identical, and no temporary files left beside them


def test_cli_video_a_failed_run_creates_no_folder(tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "000.png").write_bytes(b"\x89PNG\r\n\x1a\n broken")
    r = run("video", broken, "-o", tmp_path / "new" / "out")
    assert r.returncode == 1 and "no frame could be decoded" in r.stderr
    assert not (tmp_path / "new").exists()


def test_cli_video_no_overlay_removes_an_earlier_runs_overlay(tmp_path):
    """An ``overlay.mp4`` left beside new selections would show an earlier run's: ``--no-overlay`` removes it."""
    frames = _frames(tmp_path / "frames")
    out = tmp_path / "out"
    assert run("video", frames, "-q", "the box", "-o", out).returncode == 0
    assert (out / "overlay.mp4").exists()
    r = run("video", frames, "--box", "0,0,20,20", "-o", out, "--no-overlay")
    assert r.returncode == 0, r.stderr
    assert set(_contents(out)) == {"selections.jsonl", "stats.jsonl"}
