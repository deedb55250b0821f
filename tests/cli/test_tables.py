"""Tables a person can read at any terminal width: the whole table, its compact form or the narrow layout; ``--json``
where a table is printed; plurals; scales as ``x0.86``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from rich.console import Console

from foveate._tables import plural, print_table, scale_text

from .common import BIN

HEADER = ["group", "channels", "slice", "encode ms", "status", "description"]
ROWS = [
    ["color", "r, g, b, l, a, b2, chroma", "0-6", "3.1", "ok", "colour and lightness of each tile, averaged"],
    ["text", "text_prob, text_height, text_emb0, text_emb1", "7-10", "812.0", "ok", "OCR lines and their embeddings"],
]


def _printed(width: int, **kw) -> tuple[str, str]:
    console = Console(width=width, record=True, file=open(os.devnull, "w"), color_system=None)
    layout = print_table(console, HEADER, ROWS, **kw)
    return layout, console.export_text()


@pytest.mark.parametrize("width", [200, 100, 80, 20])
def test_a_table_never_wraps_a_cell(width):
    layout, text = _printed(width, optional=("description", "slice", "channels"), right=("encode ms",))
    lines = text.splitlines()
    assert all(len(line) <= width for line in lines)
    if layout == "narrow":  # one block per row, its "column: value" pairs wrapped, never split
        assert "group text" in lines and any(line.strip() == "encode ms: 812.0;" for line in lines)
    else:  # each row on one line, whole
        assert any(line.startswith("text") and "812.0" in line and "ok" in line for line in lines)
    want = {200: "wide", 100: "compact", 80: "compact", 20: "narrow"}[width]
    assert layout == want
    if layout == "wide":
        assert "OCR lines and their embeddings" in text
    if layout == "compact":
        assert "description" not in text and "812.0" in text


def test_narrow_without_optional_columns():
    layout, text = _printed(60)
    lines = text.splitlines()
    assert layout == "narrow" and "  description: OCR lines and their embeddings" in lines
    assert all(len(line) <= 60 for line in lines) and "  slice: 7-10; encode ms: 812.0; status: ok;" in lines


def test_plurals_and_scales():
    assert [plural(n, "picture") for n in (0, 1, 2, 1378)] == [
        "0 pictures",
        "1 picture",
        "2 pictures",
        "1,378 pictures",
    ]
    assert plural(1, "query", "queries") == "1 query" and plural(3, "query", "queries") == "3 queries"
    assert [scale_text(s) for s in (1 / 0.8571, 0.857, 1.0, 0.5, 2.0, 10.0)] == [
        "x1.17",
        "x0.86",
        "x1",
        "x0.5",
        "x2",
        "x10",
    ]


def _run(*args, columns: int = 80):
    cmd = [str(BIN), *map(str, args)] if BIN.exists() else [sys.executable, "-m", "foveate.cli", *map(str, args)]
    env = {**os.environ, "COLUMNS": str(columns)}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)


@pytest.fixture(scope="module")
def page_fvt(tmp_path_factory, page_texture):
    path = tmp_path_factory.mktemp("fvt") / "page.fvt"
    page_texture.save(path)
    return path


def test_info_fits_80_columns_and_has_json(page_fvt):
    r = _run("info", page_fvt)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines)
    doc = json.loads(_run("info", page_fvt, "--json").stdout)
    assert (doc["width"], doc["height"]) == (850, 1100) and doc["text"]["lines"] > 0
    for g in doc["groups"]:  # each group on a line of its own with its status: nothing wrapped
        assert any(line.split()[:1] == [g["group"]] and g["status"].split()[0] in line for line in lines), g
    assert [v["tile_px"] for v in doc["levels"]] == [16 << i for i in range(len(doc["levels"]))]
    assert f"{doc['text']['lines']} OCR lines" in r.stdout


def test_prompt_prints_scales_as_factors(page_fvt, tmp_path):
    r = _run("prompt", page_fvt, "-q", "What is the total due?", "--model", "Qwen/Qwen3-VL-8B-Instruct", "-o", tmp_path)
    assert r.returncode == 0, r.stderr
    assert not re.search(r"(?<![\w/-])1/[0-9]", r.stdout), r.stdout  # no "1/0.8571" (a tmp path may hold "-1/")
    assert all(len(line) <= 80 for line in r.stdout.splitlines())
    ledger = json.loads((tmp_path / "ledger.json").read_text())
    for p in ledger["pictures"] + [ledger["uniform"]]:
        assert scale_text(1 / p["scale"]) in r.stdout
