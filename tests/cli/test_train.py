"""``foveate train``'s bad inputs: one line (``error: ...``), exit code 1, no traceback, and refused before any data
is read or anything is written."""

from __future__ import annotations

import pytest

from .common import run


@pytest.mark.parametrize(
    "args,needle",
    [
        (("-b", "0"), "budget must be at least 1"),
        (("-b", "64,0"), "budget must be at least 1"),
        (("-o", "folder"), "is a folder"),
        (("-o", "/dev/null/x.safetensors"), "/dev/null is not a folder"),
        (("-o", "file/sub/x.safetensors"), "is not a folder"),
        (("-o", "/dev/null"), "not a regular file"),
        (("--report", "folder"), "--report folder is a folder"),
        (("-p", "fast"), "no text group"),
        (("-p", "nope"), "unknown preset"),
        (("--from", "handset"), "no answer ranker"),
    ],
)
def test_cli_train_refuses_bad_inputs_up_front_in_one_line(tmp_path, args, needle):
    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_text("x")
    r = run("train", "synth:3", "-o", "w.safetensors", "--cache", "cache", *args, cwd=tmp_path)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert needle in r.stderr and "Traceback" not in r.stderr
    assert r.stderr.startswith("error: ") and len(r.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "folder"]  # no cache drawn, no .tmp left


def test_a_malformed_budget_is_a_usage_error(tmp_path):
    r = run("train", "synth:3", "-o", "w.safetensors", "--cache", "cache", "-b", "lots", cwd=tmp_path)
    assert r.returncode == 2 and "--budget takes whole numbers" in r.stderr and "Traceback" not in r.stderr
    assert list(tmp_path.iterdir()) == []
