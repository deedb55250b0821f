"""The real ``foveate`` command: encode -> select from the saved texture, info, errors as one line."""

from __future__ import annotations

import json

import pytest

from .common import run


def test_encode_then_select_several_queries(tmp_path, page_path):
    r = run("encode", page_path, "-o", tmp_path / "page.fvt", "--preset", "fast")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "page.fvt").exists()
    r = run(
        "select",
        tmp_path / "page.fvt",
        "-q",
        "total due",
        "-q",
        "invoice date",
        "--box",
        "560,450,790,550",
        "-b",
        "100",
        "-o",
        tmp_path / "out",
    )
    assert r.returncode == 0, r.stderr
    dirs = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert dirs == ["q01-total-due", "q02-invoice-date"]
    for d in dirs:
        doc = json.loads((tmp_path / "out" / d / "selection.json").read_text())
        assert doc["num_tokens"] <= 100
        for f in ("overlay.png", "mosaic.png", "tokens.safetensors", "crops/crops.json"):
            assert (tmp_path / "out" / d / f).exists()


def test_select_json_on_bundled_example(tmp_path):
    r = run(
        "select",
        "example:photo",
        "--point",
        "250,200",
        "--mode",
        "topk",
        "-b",
        "64",
        "--json",
        "-o",
        tmp_path / "o",
        "--preset",
        "fast",
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["num_tokens"] == 64 and doc["mode"] == "topk"


def test_info(tmp_path, photo_path):
    r = run("info", photo_path, "--preset", "full")
    assert r.returncode == 0, r.stderr
    assert "semantic" in r.stdout and "absent" in r.stdout and "features" in r.stdout


@pytest.mark.parametrize(
    "args,needle",
    [
        (("select", "missing.png"), "no such file"),
        (("select", "example:photo", "-b", "0"), "budget"),
        (("select", "example:photo", "--mode", "spiral"), "unknown selection mode"),
        (("select", "example:photo", "--preset", "nope"), "unknown preset"),
        (("select", "example:photo", "--point", "9000,5"), "outside"),
        (("select", "example:nothing"), "no bundled example"),
        (("encode", "notes.txt"), "not a readable image"),
        (("info", "bad.fvt"), "not a foveate texture"),
    ],
)
def test_errors_are_one_line_without_traceback(tmp_path, args, needle):
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "bad.fvt").write_bytes(b"\x00" * 64)
    r = run(*args, cwd=tmp_path)
    assert r.returncode == 1
    assert needle in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "args,needle",
    [
        (("select", "example:photo", "--point", "1,2,3"), "--point takes 2 numbers"),
        (("select", "example:photo", "--box", "1,2,x,4"), "--box takes numbers"),
        (("eval", ".", "--budget", "64,1.5"), "--budget takes whole numbers"),
        (("select", "example:photo", "--budget", "abc"), "Invalid value for '--budget'"),
        (("eval-video", ".", "--nope"), "No such option: --nope"),
        (("select",), "Missing argument"),
        (("store", "ls", "a", "b"), "unexpected extra argument"),
    ],
)
def test_usage_error_exit_code(tmp_path, args, needle):
    """Usage errors are one line (no typer box), exit 2, and say where the help is."""
    r = run(*args, cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("usage error: "), r.stderr
    assert needle in r.stderr and "--help'" in r.stderr


def test_cli_explain_shows_the_matched_ocr_lines(page_texture, tmp_path):
    page_texture.save(tmp_path / "page.fvt")
    r = run("select", tmp_path / "page.fvt", "-q", "What is the total due?", "--explain", "-o", tmp_path / "o")
    assert r.returncode == 0, r.stderr
    assert "query:text" in r.stdout and "answer '$1,234.50'" in r.stdout and "probability" in r.stdout
    doc = __import__("json").loads((tmp_path / "o" / "q01-what-is-the-total-due" / "selection.json").read_text())
    top = doc["evidence"][0]
    assert top["text"] == "$1,234.50" and top["box"][1] > 500 and top["levels"][0] == 0  # the total, not the subtotal
    r = run(
        "select",
        tmp_path / "page.fvt",
        "-q",
        "What is the total due?",
        "--explain",
        "--weights",
        "handset",
        "-o",
        tmp_path / "h",
    )
    assert r.returncode == 0, r.stderr
    assert "match 'Total due'" in r.stdout and "right '$1,234.50'" in r.stdout
    doc = __import__("json").loads((tmp_path / "h" / "q01-what-is-the-total-due" / "selection.json").read_text())
    assert doc["evidence"][0]["text"] == "Total due" and doc["evidence"][0]["levels"][0] == 0


def test_cli_says_once_that_the_semantic_channels_are_absent(photo_texture, tmp_path):
    photo_texture.save(tmp_path / "photo.fvt")
    r = run("select", tmp_path / "photo.fvt", "-q", "the helmet", "-q", "the flag", "-o", tmp_path / "o")
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("semantic channels are absent") == 1
    assert r.stderr.count("no text was found") == 2  # and the text term says, per query, why it adds nothing
