"""Synthetic documents: ground truth inside the image, deterministic for a seed, and readable by real OCR at the
answer box (so the answers the ranker learns from are really there)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from foveate.synth import KINDS, make_dataset
from foveate.synth.documents import GENERATED_MARK


def test_dataset_is_well_formed_and_deterministic(tmp_path):
    a = make_dataset(tmp_path / "a", 6, seed=3)
    b = make_dataset(tmp_path / "b", 6, seed=3)
    assert (a / "queries.jsonl").read_text() == (b / "queries.jsonl").read_text()
    rows = [json.loads(x) for x in (a / "queries.jsonl").read_text().splitlines()]
    assert {r["kind"] for r in rows} == set(KINDS) and len(rows) >= 6
    for r in rows:
        w, h = Image.open(a / r["image"]).size
        assert len(r["boxes"]) == len(r["text_heights"]) == len(r["answer_text"])
        for x0, y0, x1, y1 in r["boxes"]:
            assert 0 <= x0 < x1 <= w and 0 <= y0 < y1 <= h
        assert "?" in r["query"] and r["key"]
    assert sum(bool(r.get("repeated_value")) for r in rows) <= len(rows)
    assert json.loads((a / GENERATED_MARK).read_text())["generator"] == "foveate.synth.documents"


def test_unknown_kind(tmp_path):
    from foveate.core.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown document kind"):
        make_dataset(tmp_path, 1, kinds=("poem",))


@pytest.mark.slow
def test_ocr_reads_the_answers_where_the_boxes_say(tmp_path):
    from foveate.eval.answers import query_answer_found
    from foveate.eval.data import parse_query_line
    from foveate.query.text import read_text

    folder = make_dataset(tmp_path, 3, seed=11)
    raw = (folder / "queries.jsonl").read_text().splitlines()
    found = []
    lines_of = {}
    for i, line in enumerate(raw, 1):
        q = parse_query_line(line, i)
        if q.image not in lines_of:
            lines_of[q.image] = read_text(np.asarray(Image.open(folder / q.image).convert("RGB")))
        res = query_answer_found(q, lines_of[q.image])
        found.append(res is not None and res["fuzzy"])
    assert np.mean(found) >= 0.8, found
