"""``foveate encode``, ``info``, ``select`` and ``prompt`` on a PDF (made with reportlab), run as the real command:
one document texture file or store entry, one budget across the pages, the schema version 2 JSON, a plan that never
exceeds the whole document as pictures, and bad files as one error line."""

from __future__ import annotations

import json

import pytest
from reportlab.lib import pdfencrypt

from foveate.document.select import select_document
from foveate.document.texture import DocumentTexture, encode_document
from foveate.store import TextureStore
from foveate.store.documents import get_document
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
    (dest,) = (tmp_path / "s").glob("q01-*")  # one layout for one query or many, as for an image
    for p in {t["page"] for t in doc["tokens"]}:
        page = json.loads((dest / f"page-{p + 1:03d}" / "selection.json").read_text())
        assert page["schema_version"] == 1  # a page's own outputs keep the single-image schema
        assert (dest / f"page-{p + 1:03d}" / "overlay.png").is_file()


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


@pytest.mark.slow
def test_encode_writes_one_document_texture_that_info_and_select_read(pdf, tmp_path):
    fvt = tmp_path / "doc.fvt"
    done = run("encode", pdf, "-o", fvt, "--preset", "fast")
    assert done.returncode == 0, done.stderr[-2000:]
    doc = DocumentTexture.load(fvt)
    ref = encode_document(pdf, preset="fast", groups=("text",))  # the pages' content hashes do not depend on groups
    assert doc.num_pages == 2 and [p.content_hash for p in doc.pages] == [p.content_hash for p in ref.pages]
    assert doc.text_sources == ["text-layer"] * 2 and doc.config.preset == "fast"
    info = run("info", fvt, "--json")
    assert info.returncode == 0, info.stderr[-2000:]
    meta = json.loads(info.stdout)
    assert meta["id"] == doc.id and meta["num_pages"] == 2 and meta["kind"] == "pdf"
    assert meta["pages"] == [{"width": 1224, "height": 1584}] * 2  # Letter at 144 dpi: 8.5 x 11 in x 144
    text = run("info", fvt)
    assert text.returncode == 0 and "2 pages" in text.stdout and "text-layer" in text.stdout
    sel = run("select", fvt, "-q", "Who attended the meeting?", "-b", "96", "-o", tmp_path / "s", "--json")
    assert sel.returncode == 0, sel.stderr[-2000:]
    out = json.loads(sel.stdout)
    assert out["schema_version"] == 2 and out["texture_id"] == doc.id
    assert 0 < out["num_tokens"] <= 96 and {t["page"] for t in out["tokens"]} <= {0, 1}


def test_encode_into_a_store_is_one_document_entry(pdf, tmp_path):
    st = tmp_path / "store"
    first = run("encode", pdf, "--store", st, "--preset", "fast")
    again = run("encode", pdf, "--store", st, "--preset", "fast")
    assert first.returncode == again.returncode == 0, (first.stderr[-2000:], again.stderr[-2000:])
    assert "(stored;" in first.stdout.replace("\n", " ") and "stored already" in again.stdout.replace("\n", " ")
    with TextureStore(st, create=False) as store:
        ids = [e.id for e in store.entries()]
        assert len(ids) == 1
        doc = get_document(store, ids[0])
    assert doc is not None and doc.num_pages == 2 and doc.id == ids[0]
    # the entry is read by STORE/#ID (a unique prefix will do), never encoded again
    q = "Who attended the meeting?"
    sel = run("select", f"{st}/#{ids[0][:12]}", "-q", q, "-b", "96", "-o", tmp_path / "s", "--json")
    assert sel.returncode == 0, sel.stderr[-2000:]
    got = json.loads(sel.stdout)
    want = select_document(doc, q, 96).to_dict()  # the library on the stored document, in this process
    assert got["schema_version"] == 2 and got["texture_id"] == doc.id
    assert [(t["page"], t["box"]) for t in got["tokens"]] == [(t["page"], t["box"]) for t in want["tokens"]]
    pr = run("prompt", f"{st}/#{ids[0]}", "-q", "What is the total due?", "-o", tmp_path / "p", "--json")
    assert pr.returncode == 0, pr.stderr[-2000:]
    assert 0 < json.loads(pr.stdout)["plan_tokens"] <= json.loads(pr.stdout)["document_tokens"]
    _one_error_line(run("select", f"{st}/#ffff0000", "-q", q, "-o", tmp_path / "x"), "ffff0000")
    info = run("info", f"{st}/#{ids[0][:12]}", "--json")  # the entry's header: its pages, nothing encoded
    assert info.returncode == 0, info.stderr[-2000:]
    meta = json.loads(info.stdout)
    assert meta["id"] == doc.id and meta["num_pages"] == 2 and meta["pages"] == [{"width": 1224, "height": 1584}] * 2
    assert meta["source"].endswith(f"#{doc.id}") and meta["text_sources"] == list(doc.text_sources)
    _one_error_line(run("info", f"{st}/#ffff0000"), "ffff0000")


def test_document_misuse_is_one_line(pdf, tmp_path):
    _one_error_line(run("info", pdf), "encode it first")
    _one_error_line(run("encode", pdf, "-o", tmp_path / "dir", "--preset", "fast"), "one .fvt file")
    _one_error_line(run("encode", pdf, "-o", tmp_path / "d.fvt", "--store", tmp_path / "st"), "not both")


@pytest.mark.slow
def test_prompt_for_qwen_writes_the_processors_inputs_for_every_page_picture(pdf, tmp_path):
    """A document for a local Qwen2-VL: the chat-template messages, one image entry per planned picture, and the
    processor's inputs (transformers' own image processor) in inputs.safetensors -- as many merged tokens as the
    plan bills, page by page."""
    from safetensors.numpy import load_file

    done = run("prompt", pdf, "-q", "What is the total due?", "--vlm", "qwen2-vl", "-o", tmp_path / "q", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    ledger = json.loads(done.stdout)
    assert ledger["api"] == "qwen2-vl" and 0 < ledger["plan_tokens"] <= ledger["document_tokens"]
    inputs = load_file(str(tmp_path / "q" / "inputs.safetensors"))
    grid = inputs["image_grid_thw"]
    assert len(grid) == len(ledger["pictures"]) and inputs["pixel_values"].shape[0] == int(grid.prod(1).sum())
    assert int(grid.prod(1).sum()) // 4 == ledger["plan_tokens"]  # 2x2 patches merge into one token
    body = json.loads((tmp_path / "q" / "request.json").read_text())
    content = body["messages"][0]["content"]
    assert sum(1 for c in content if c.get("type") == "image") == len(ledger["pictures"])
