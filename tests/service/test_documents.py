"""Documents in the HTTP service, against a real ``foveate serve`` process: a PDF (made with reportlab) uploaded once
is one document entry; select and prompt on its id spend one budget across the pages, as the library does in this
process; routes that need one image, and bad PDFs, answer one-line 4xx."""

from __future__ import annotations

import asyncio
import io

import httpx
import numpy as np
import pytest
from PIL import Image
from reportlab.lib import pdfencrypt

from foveate.core.config import EncodeConfig
from foveate.document.select import select_document
from foveate.document.texture import encode_document
from foveate.selection import select
from foveate.vlm import resolve

from ..document.test_document import PAGES, _pdf, _text_page
from .test_service import metric

#: the conftest server's encode config (``--preset fast --max-pixels 4000000``)
SERVER_CONFIG = EncodeConfig(preset="fast", max_pixels=4_000_000)


@pytest.fixture(scope="module")
def pdf_bytes():
    return _pdf([_text_page(ls) for ls in PAGES[:2]])


@pytest.fixture(scope="module")
def uploaded(server, pdf_bytes):
    first = httpx.post(server.url + "/v1/textures", content=pdf_bytes, timeout=120)
    again = httpx.post(server.url + "/v1/textures", content=pdf_bytes, timeout=120)
    return first, again


@pytest.fixture(scope="module")
def local_doc(pdf_bytes):
    return encode_document(pdf_bytes, SERVER_CONFIG)


def test_document_upload_is_one_entry_by_content(server, uploaded, local_doc):
    first, again = uploaded
    assert (first.status_code, again.status_code) == (201, 200), (first.text, again.text)
    a, b = first.json(), again.json()
    assert a["kind"] == "document" and a["pages"] == 2 and a["created"] is True and b["created"] is False
    assert a["id"] == b["id"] == local_doc.id  # the same pages + config as this process encodes them
    assert (a["width"], a["height"]) == (1224, 1584)  # Letter at 144 dpi
    info = httpx.get(f"{server.url}/v1/textures/{a['id']}", timeout=30).json()
    assert info["kind"] == "document" and info["pages"] == 2


def test_document_select_and_prompt_match_the_library(server, uploaded, local_doc):
    tid = uploaded[0].json()["id"]
    q = "Who attended the meeting?"
    r = httpx.post(f"{server.url}/v1/textures/{tid}/select", json={"text": q, "budget": 128}, timeout=60)
    assert r.status_code == 200, r.text
    got = r.json()
    want = select_document(local_doc, q, 128).to_dict()
    assert got["schema_version"] == 2 and got["texture_id"] == tid
    assert [(t["page"], t["box"]) for t in got["tokens"]] == [(t["page"], t["box"]) for t in want["tokens"]]
    assert 0 < got["num_tokens"] <= 128
    r = httpx.post(f"{server.url}/v1/textures/{tid}/prompt", json={"text": "What is the total due?"}, timeout=60)
    assert r.status_code == 200, r.text
    ledger = r.json()["ledger"]
    rule, _ = resolve("openai", None)
    whole = [rule.whole(1224, 1584)[1].tokens] * 2  # every page as a picture, priced by the rule itself
    assert ledger["page_tokens"] == whole and ledger["document_tokens"] == sum(whole)
    assert 0 < ledger["plan_tokens"] <= ledger["document_tokens"]
    parts = r.json()["request"]["messages"][0]["content"]
    assert sum(p["type"] == "image_url" for p in parts) == len(ledger["pictures"]) > 0
    body = {"text": "What is the total due?", "vlm": "qwen2-vl"}  # a local model: the pictures come as data URLs
    r = httpx.post(f"{server.url}/v1/textures/{tid}/prompt", json=body, timeout=60)
    assert r.status_code == 200, r.text
    assert len(r.json()["pictures"]) == len(r.json()["ledger"]["pictures"]) > 0
    assert all(u.startswith("data:image/png;base64,") for u in r.json()["pictures"])


def test_page_spends_the_budget_on_one_page(server, uploaded, photo_id):
    tid = uploaded[0].json()["id"]
    body = {"text": "total", "budget": 96, "page": 2, "boxes": [[100, 100, 900, 500]]}
    r = httpx.post(f"{server.url}/v1/textures/{tid}/select", json=body, timeout=60)
    assert r.status_code == 200, r.text
    assert {t["page"] for t in r.json()["tokens"]} == {1}  # 0-based in the selection, as the library writes it
    r = httpx.post(f"{server.url}/v1/textures/{tid}/select", json={**body, "page": 3}, timeout=60)
    assert r.status_code == 422 and "outside the document's 2 pages" in r.json()["detail"], r.text
    r = httpx.post(f"{server.url}/v1/textures/{tid}/select", json={"text": "total", "boxes": body["boxes"]}, timeout=60)
    assert r.status_code == 422 and "page" in r.json()["detail"], r.text
    r = httpx.post(f"{server.url}/v1/textures/{photo_id}/select", json={"text": "x", "page": 1}, timeout=60)
    assert r.status_code == 422 and "one image" in r.json()["detail"], r.text


@pytest.mark.parametrize("route", ["overlay.png", "mosaic.png", "tokens", "crops"])
def test_single_image_routes_render_the_page_asked_for(server, uploaded, local_doc, photo_id, route):
    tid = uploaded[0].json()["id"]
    url = f"{server.url}/v1/textures/{tid}/{route}"
    r = httpx.get(url, params={"text": "total"}, timeout=60)  # which page? the 422 names the parameter
    assert r.status_code == 422 and "document of 2 pages" in r.json()["detail"], r.text
    assert "'page' parameter (1-based, 1-2)" in r.json()["detail"]
    for page in (0, 3):
        r = httpx.get(url, params={"text": "total", "page": page}, timeout=60)
        assert r.status_code == 422, r.text
    r = httpx.get(f"{server.url}/v1/textures/{photo_id}/{route}", params={"text": "x", "page": 1}, timeout=60)
    assert r.status_code == 422 and "one image" in r.json()["detail"], r.text
    r = httpx.get(url, params={"text": "total", "page": 2, "budget": 96}, timeout=60)
    assert r.status_code == 200, r.text
    page = local_doc.pages[1]  # page 2 (1-based) as one image, selected here by the library
    want = select(page, "total", 96, mode="auto", gist=True, weights="default")
    if route == "tokens":
        from safetensors.numpy import load

        got = load(r.content)
        assert np.array_equal(got["boxes"], want.tensors()["boxes"].numpy())
    elif route == "crops":
        plan = r.json()
        assert plan["image_size"] == [1224, 1584] and plan["pictures"], plan
    else:
        with Image.open(io.BytesIO(r.content)) as im:
            assert im.format == "PNG" and im.width >= page.image_size[1] // 2


def test_bad_documents_are_4xx(server):
    locked = _pdf([_text_page(PAGES[0])], encrypt=pdfencrypt.StandardEncryption("pw"))
    long = _pdf([_text_page([(72, 700, f"page {i}")]) for i in range(51)])
    cases = [(locked, 400, "password"), (long[:300], 400, "not a readable PDF"), (long, 422, "page cap")]
    for data, status, needle in cases:
        r = httpx.post(server.url + "/v1/textures", content=data, timeout=60)
        assert r.status_code == status and needle in r.json()["detail"], r.text


def test_concurrent_uploads_of_one_document_encode_it_once(server):
    data = _pdf([_text_page(ls) for ls in PAGES[1:]])  # a document this server has not seen
    before = metric(server.url, "foveate_encodes_total")

    async def burst():
        async with httpx.AsyncClient(base_url=server.url, timeout=120) as c:
            return await asyncio.gather(*(c.post("/v1/textures", content=data) for _ in range(4)))

    rs = asyncio.run(burst())
    assert sorted(r.status_code for r in rs) == [200] * 3 + [201], [r.text for r in rs]
    assert len({r.json()["id"] for r in rs}) == 1 and {r.json()["pages"] for r in rs} == {2}
    assert metric(server.url, "foveate_encodes_total") == before + 1
