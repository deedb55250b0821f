"""``foveate select`` and ``foveate prompt`` on a PDF (made with reportlab), run as the real command: one budget
across the pages, the schema version 2 JSON, a plan that never exceeds the whole document as pictures, and bad files
as one error line."""

from __future__ import annotations

import json

import pytest
from reportlab.lib import pdfencrypt

from foveate.vlm import resolve

from ..document.test_document import PAGES, _pdf, _text_page
from .common import run
from .test_bad_input import _one_error_line


@pytest.fixture(scope="module")
def pdf(tmp_path_factory):
    p = tmp_path_factory.mktemp("pdf") / "doc.pdf"
    p.write_bytes(_pdf([_text_page(ls) for ls in PAGES[:2]]))
    return p


@pytest.mark.slow
def test_prompt_plans_over_pages_within_the_whole_document(pdf, tmp_path):
    done = run("prompt", pdf, "-q", "What is the total due?", "--dpi", "72", "-o", tmp_path / "p", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    ledger = json.loads(done.stdout)
    rule, _ = resolve("openai", None)
    whole = [rule.whole(612, 792)[1].tokens] * 2  # every page as a picture, priced by the rule itself
    assert ledger["page_tokens"] == whole and ledger["document_tokens"] == sum(whole)
    assert 0 < ledger["plan_tokens"] <= ledger["document_tokens"]
    assert ledger["plan_tokens"] == sum(p["plan_tokens"] for p in ledger["page_plans"])
    body = json.loads((tmp_path / "p" / "request.json").read_text())
    parts = body["messages"][0]["content"]
    images = [p for p in parts if p["type"] == "image_url"]
    assert len(images) == len(ledger["pictures"]) == len(list((tmp_path / "p" / "pictures").iterdir()))
    assert all(p["line"].startswith(f"Page {p['page'] + 1} of 2.") for p in ledger["pictures"])
    assert parts[-1] == {"type": "text", "text": "What is the total due?"}


@pytest.mark.slow
def test_select_writes_schema_2_and_pages(pdf, tmp_path):
    done = run("select", pdf, "-q", "Who attended the meeting?", "-b", "128", "-o", tmp_path / "s", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads(done.stdout)
    assert doc["schema_version"] == 2 and doc["pages"] == [{"width": 1224, "height": 1584}] * 2
    assert 0 < doc["num_tokens"] <= 128 and all(t["page"] in (0, 1) for t in doc["tokens"])
    for p in {t["page"] for t in doc["tokens"]}:
        page = json.loads((tmp_path / "s" / f"page-{p + 1:03d}" / "selection.json").read_text())
        assert page["schema_version"] == 1  # a page's own outputs keep the single-image schema
        assert (tmp_path / "s" / f"page-{p + 1:03d}" / "overlay.png").is_file()


@pytest.mark.slow
def test_bad_documents_are_one_line(tmp_path):
    enc = tmp_path / "locked.pdf"
    enc.write_bytes(_pdf([_text_page(PAGES[0])], encrypt=pdfencrypt.StandardEncryption("pw")))
    _one_error_line(run("prompt", enc, "-q", "x", "-o", tmp_path / "o"), "password")
    long = tmp_path / "long.pdf"
    long.write_bytes(_pdf([_text_page([(72, 700, f"page {i}")]) for i in range(6)]))
    _one_error_line(run("prompt", long, "-q", "x", "--max-pages", "5", "-o", tmp_path / "o"), "page cap")
    cut = tmp_path / "cut.pdf"
    cut.write_bytes(long.read_bytes()[:300])
    _one_error_line(run("select", cut, "-q", "x", "-o", tmp_path / "o"), "not a readable PDF")
