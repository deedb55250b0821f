"""Synthetic documents: ground truth inside the image, deterministic for a seed, and readable by real OCR at the
answer box (so the answers the ranker learns from are really there)."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from PIL import Image, ImageDraw

from foveate.synth import KINDS, make_dataset
from foveate.synth.documents import GENERATED_MARK
from foveate.synth.draw import _scanned, render
from foveate.synth.forms import form
from foveate.synth.vocab import font


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
    folder = make_dataset(tmp_path, 12, kinds=("form",), seed=2)
    rows = [json.loads(x) for x in (folder / "queries.jsonl").read_text().splitlines()]
    assert rows and all(r["kind"] == "form" and r["key"] in ("field", "find") for r in rows)
    finds = [r for r in rows if r["key"] == "find"]
    assert finds and all(f'"{r["answer_text"][0]}"' in r["query"] for r in finds)  # the text asked for is the answer
    rows = [r for r in rows if r["key"] == "field"]
    for r in rows:
        assert r["key_text"] in r["query"] and all(r["key_text"] not in a for a in r["answer_text"])
    assert any(len(r["boxes"]) > 1 for r in rows)  # a table's column: one question, several boxes
    per_page: dict[str, list] = {}
    for r in rows:
        per_page.setdefault(r["image"], []).extend(tuple(b) for b in r["boxes"])
    for boxes in per_page.values():  # no two questions of a page share an answer box
        assert len(set(boxes)) == len(boxes)
    items = form(random.Random(0)).items
    labels = [it.text.rstrip(":").upper() for it in items if not it.role or it.role.startswith("find|")]
    fields = [it.role.split("|")[1].upper() for it in items if it.role and it.role.startswith("field|")]
    assert set(fields) <= set(labels)  # every value's label is printed on the page


def test_a_form_tables_column_is_asked_by_its_header():
    """A question with several boxes is a table's column: every box lies below the header the question quotes, in
    that header's column (the header with the nearest left edge at or left of the cell's centre)."""
    seen = 0
    for seed in range(12):
        r = random.Random(seed)
        doc = form(r)
        render(doc, r)
        cells: dict[str, list] = {}
        for it in doc.items:
            if it.role and it.role.startswith("field|"):
                cells.setdefault(it.role.split("|", 1)[1], []).append(it)
        for label, its in cells.items():
            if len(its) < 2:
                continue
            seen += 1
            header = next(it for it in doc.items if it.text == label and not (it.role or "").startswith("field|"))
            row = [
                it
                for it in doc.items
                if abs(it.box[1] - header.box[1]) < 3
                and it.font == header.font
                and not (it.role or "").startswith("field|")
            ]
            for c in its:
                assert c.box[1] > header.box[3]
                centre = (c.box[0] + c.box[2]) / 2
                assert max((h for h in row if h.box[0] <= centre), key=lambda h: h.box[0]) is header
    assert seen >= 3


def test_a_scanned_form_keeps_its_size_and_its_ink_where_the_text_is():
    """A faxed page is drawn at the page's size (so the answer boxes stay valid) and its text stays dark."""
    im = Image.new("L", (300, 120), 250)
    ImageDraw.Draw(im).text((20, 40), "Invoice 12345", fill=20, font=font(None, 24))
    for seed in range(4):
        out = np.asarray(_scanned(im.copy(), random.Random(seed)), np.float32)
        assert out.shape == (120, 300)
        assert out[40:70, 20:200].mean() < out[90:, :].mean() - 20  # the text is still darker than blank paper


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
