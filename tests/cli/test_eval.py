"""``foveate eval`` end to end on a generated set; its errors are one line."""

from __future__ import annotations

import json

import pytest

from ..eval.common import make_eval_set
from .common import run


@pytest.fixture(scope="module")
def eval_set(tmp_path_factory):
    root = tmp_path_factory.mktemp("evalset")
    return root, make_eval_set(root)


def test_cli_eval(eval_set, tmp_path):
    root, _ = eval_set
    r = run(
        "eval",
        root,
        "-b",
        "64,144",
        "--preset",
        "fast",
        "--random-seeds",
        "2",
        "--markdown",
        "--group-by",
        "page",
        "--variant",
        "topk:mode=topk",
        "-o",
        tmp_path / "o",
        "--ocr",
        "off",
    )
    assert r.returncode == 0, r.stderr
    assert "| 144 | foveate:topk |" in r.stdout and "line 1" not in r.stderr
    assert "problems (" in r.stdout and "7 of 19 lines skipped" in r.stdout
    doc = json.loads((tmp_path / "o" / "eval.json").read_text())
    assert doc["counts"]["encodes"] == 2 and doc["ocr"]["status"] == "off"
    assert {p["kind"] for p in doc["problems"]} >= {"json", "schema", "image_missing", "no_boxes"}


def test_cli_eval_json(eval_set, tmp_path):
    """--json prints eval.json without its records (and no table); the file keeps them."""
    root, _ = eval_set
    out = tmp_path / "o"
    r = run("eval", root, "-b", "64", "-p", "fast", "--ocr", "off", "--baselines", "none", "-o", out, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    full = json.loads((tmp_path / "o" / "eval.json").read_text())
    assert "records" not in doc and full["records"] and doc == {k: v for k, v in full.items() if k != "records"}
    assert doc["summary"] and "wrote" in r.stderr


@pytest.mark.parametrize(
    "setup,args,needle",
    [
        (lambda d: None, ("eval", "missing"), "not a folder"),
        (lambda d: (d / "empty").mkdir(), ("eval", "empty"), "no queries.jsonl"),
        (
            lambda d: (d / "bad").mkdir() or (d / "bad" / "queries.jsonl").write_text("nope\n"),
            ("eval", "bad"),
            "nothing to evaluate",
        ),
        (lambda d: None, ("eval", ".", "-b", "0"), "budget"),
        (lambda d: None, ("eval", ".", "-b", "64,-1"), "budget must be at least 1"),
        (lambda d: None, ("eval", ".", "-b", ","), "give at least one budget"),
        (lambda d: None, ("eval", ".", "--ocr-budget", "0"), "--ocr-budget: budget must be at least 1"),
        (lambda d: make_eval_set(d / "set") and (d / "f").write_text("x"), ("eval", "set", "-o", "f"), "not a folder"),
        (lambda d: make_eval_set(d / "set"), ("eval", "set", "-o", "/dev/null/x"), "not a folder"),
        (lambda d: None, ("eval", ".", "--baselines", "psychic"), "unknown baseline"),
        (lambda d: None, ("eval", ".", "--variant", "x:budget=4"), "unknown selection setting"),
    ],
)
def test_cli_eval_errors(tmp_path, setup, args, needle):
    setup(tmp_path)
    r = run(*args, cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert needle in r.stderr and "Traceback" not in r.stderr


def test_cli_eval_reads_hostile_lines_as_problems(tmp_path):
    """A byte order mark, a line nested 100k deep, a 5,000-digit number, a lone surrogate: the run goes on, the
    first line is read, and the summary counts the three broken lines."""
    root = tmp_path / "set"
    info = make_eval_set(root, bad_lines=False)
    lines = (root / "queries.jsonl").read_text().splitlines()
    lines += [
        "[" * 100_000 + "]" * 100_000,
        '{"image": "images/form0.png", "query": "q", "boxes": [[0, 0, 10, ' + "9" * 5000 + "]]}",
        '{"image": "images/form0.png", "query": "\\ud800", "boxes": [[0, 0, 10, 10]]}',
    ]
    (root / "queries.jsonl").write_bytes(b"\xef\xbb\xbf" + "\n".join(lines).encode() + b"\n")
    r = run("eval", root, "-b", "64", "-p", "fast", "--ocr", "off", "--baselines", "none", "-o", tmp_path / "o")
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    doc = json.loads((tmp_path / "o" / "eval.json").read_text())
    n = info["n_valid"]
    assert doc["counts"]["evaluated_queries"] == n  # the first line too
    assert [(p["line"], p["kind"]) for p in doc["problems"]] == [(n + 1, "json"), (n + 2, "json"), (n + 3, "json")]
