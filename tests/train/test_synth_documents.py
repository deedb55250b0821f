"""Synthetic documents: ground truth inside the image, deterministic for a seed, and readable by real OCR at the
answer box (so the answers the ranker learns from are really there)."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from PIL import Image

from foveate.synth import KINDS, make_dataset
from foveate.synth.documents import GENERATED_MARK, form


def test_dataset_is_well_formed_and_deterministic(tmp_path):
    a = make_dataset(tmp_path / "a", 8, tuple(KINDS), seed=3)
    b = make_dataset(tmp_path / "b", 8, tuple(KINDS), seed=3)
    assert (a / "queries.jsonl").read_text() == (b / "queries.jsonl").read_text()
    rows = [json.loads(x) for x in (a / "queries.jsonl").read_text().splitlines()]
    assert {r["kind"] for r in rows} == set(KINDS) and len(rows) >= 6
    for r in rows:
        w, h = Image.open(a / r["image"]).size
        assert len(r["boxes"]) == len(r["text_heights"]) == len(r["answer_text"])
        for x0, y0, x1, y1 in r["boxes"]:
            assert 0 <= x0 < x1 <= w and 0 <= y0 < y1 <= h
        assert ("?" in r["query"] or r["key"] == "find") and r["key"]
    assert sum(bool(r.get("repeated_value")) for r in rows) <= len(rows)
    assert json.loads((a / GENERATED_MARK).read_text())["generator"] == "foveate.synth.documents"


def test_form_questions_quote_a_printed_label_and_point_at_its_value(tmp_path):
    """A form's field question names its field's label and its answer is the value, not the label, in a box of its
    own (no two questions of a page share one); a find question's answer is the text it quotes; every value's label
    is printed on the page."""
    folder = make_dataset(tmp_path, 6, kinds=("form",), seed=2)
    rows = [json.loads(x) for x in (folder / "queries.jsonl").read_text().splitlines()]
    assert rows and all(r["kind"] == "form" and r["key"] in ("field", "find") for r in rows)
    finds = [r for r in rows if r["key"] == "find"]
    assert finds and all(f'"{r["answer_text"][0]}"' in r["query"] for r in finds)  # the text asked for is the answer
    rows = [r for r in rows if r["key"] == "field"]
    for r in rows:
        assert r["key_text"] in r["query"] and r["key_text"] not in r["answer_text"][0]
        assert len(r["boxes"]) == 1
    per_page: dict[str, list] = {}
    for r in rows:
        per_page.setdefault(r["image"], []).append(tuple(r["boxes"][0]))
    for boxes in per_page.values():  # one field, one box: no two questions of a page share an answer
        assert len(set(boxes)) == len(boxes)
    items = form(random.Random(0)).items
    labels = [it.text.rstrip(":").upper() for it in items if not it.role or it.role.startswith("find|")]
    fields = [it.role.split("|")[1].upper() for it in items if it.role and it.role.startswith("field|")]
    assert set(fields) <= set(labels)  # every value's label is printed on the page


def test_unknown_kind(tmp_path):
    from foveate.core.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown document kind"):
        make_dataset(tmp_path, 1, kinds=("poem",))


@pytest.mark.slow
def test_ocr_reads_the_answers_where_the_boxes_say(tmp_path):
    from foveate.eval.answers import query_answer_found
    from foveate.eval.data import parse_query_line
    from foveate.query.text import read_text

    folder = make_dataset(tmp_path, len(KINDS), tuple(KINDS), seed=11)  # one of each kind
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
