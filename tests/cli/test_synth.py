"""``foveate synth``: the default kinds unless told, the kinds asked for, a clear error for an unknown one."""

from __future__ import annotations

import json

from foveate.synth.documents import DEFAULT_KINDS

from .common import run


def test_cli_synth_draws_the_default_kinds_unless_told(tmp_path):
    r = run("synth", tmp_path / "all", "-n", len(DEFAULT_KINDS), "--seed", 1)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(x) for x in (tmp_path / "all" / "queries.jsonl").read_text().splitlines()]
    assert {x["kind"] for x in rows} == set(DEFAULT_KINDS)
    r = run("synth", tmp_path / "two", "-n", 2, "--kinds", "form, letter")
    assert r.returncode == 0, r.stderr
    rows = [json.loads(x) for x in (tmp_path / "two" / "queries.jsonl").read_text().splitlines()]
    assert {x["kind"] for x in rows} == {"form", "letter"}
    r = run("synth", tmp_path / "bad", "--kinds", "poem")
    assert r.returncode != 0 and "unknown document kind" in r.stdout + r.stderr
    assert not (tmp_path / "bad").exists()  # refused before anything is written
