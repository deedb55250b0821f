"""Issue 42: the inspector page (``GET /ui``) in a real headless Chromium (the OS package, driven by Playwright),
against a real ``foveate serve`` process with the default preset (OCR: the page's question needs its text lines).

What the page shows is checked against the API answering the same request: the ledger's numbers, the overlay's
bytes, the corrupt upload's error line.  Without Chromium (``apt-get install chromium``) or Playwright (the ``dev``
extra) the browser tests skip, saying what to install -- unless ``FOVEATE_REQUIRE_BROWSER=1`` (``.ci/run`` sets it),
where they fail."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from foveate.service import ServiceSettings, create_app
from foveate.service.process import ServerProcess
from foveate.service.routes.inspector import FILES
from foveate.vlm import list_models, model_row

QUESTION = "What is the total due?"
MODEL = "claude-opus-4-7"
QUERY = {"text": QUESTION, "budget": 273}  # the page's default budget
PUBLIC = ("203.0.113.5", 1234)  # TEST-NET-3: only ever an address in the ASGI scope, never a destination
UI = Path(__file__).resolve().parents[2] / "src" / "foveate" / "service" / "ui"


# -- the page's files and the model route, in process ---------------------------------------------------------------


def test_page_follows_the_bind_policy_and_opens_without_the_key(tmp_path):
    """No key: non-loopback clients are refused the page as the API (403).  With a key, the page's files (no data)
    open like /healthz, and everything the page asks of the API needs the key."""
    app = create_app(ServiceSettings(store=tmp_path, preset="fast"))
    with TestClient(app, client=PUBLIC) as c:
        for path in ("/ui", "/ui/app.js", "/ui/app.css", "/v1/vlm-models"):
            r = c.get(path)
            assert r.status_code == 403 and "FOVEATE_API_KEY" in r.json()["detail"], path
    with TestClient(app, client=("127.0.0.1", 5)) as c:
        r = c.get("/ui")
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
        assert "default-src 'self'" in r.headers["content-security-policy"]
        assert c.get("/ui/app.js").headers["content-type"].startswith("text/javascript")
        assert c.get("/ui/other.js").status_code == 404
    app = create_app(ServiceSettings(store=tmp_path, preset="fast", api_key="k3y"))
    with TestClient(app, client=PUBLIC) as c:
        assert c.get("/ui").status_code == 200
        assert c.get("/v1/vlm-models").status_code == 401
        assert c.get("/v1/vlm-models", headers={"Authorization": "Bearer k3y"}).status_code == 200


def test_page_loads_nothing_from_elsewhere():
    """Every script, style and image the page names is one of its own files (users' machines may be offline)."""
    for name in FILES:
        text = (UI / name).read_text()
        urls = re.findall(r"""(?:src|href)=["']([^"']+)""", text) + re.findall(r"https?://[^\s\"')]+", text)
        assert all(u.startswith("/ui/") or u == "http://www.w3.org/2000/svg" for u in urls), (name, urls)
    assert len((UI / "app.js").read_text().splitlines()) < 400


def test_vlm_models_lists_the_table_with_names_that_resolve(tmp_path):
    with TestClient(create_app(ServiceSettings(store=tmp_path, preset="fast")), client=("127.0.0.1", 5)) as c:
        rows = c.get("/v1/vlm-models").json()
    assert [r["pattern"] for r in rows] == [r.pattern for r in list_models()]
    named = [r for r in rows if r["name"]]
    assert len(named) > len(rows) // 2
    for r in named:
        assert model_row(r["name"]).pattern == r["pattern"], r  # the name picks its own row, first match


# -- in a real browser ----------------------------------------------------------------------------------------------


def _launch():
    """(playwright, browser), or skip -- fail under FOVEATE_REQUIRE_BROWSER -- saying what is missing."""
    required = os.environ.get("FOVEATE_REQUIRE_BROWSER", "") not in ("", "0")
    missing = None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing = "Playwright for Python (pip install -e '.[dev]', or pip install playwright)"
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if missing is None and exe is None:
        missing = "Chromium (Debian/Ubuntu: apt-get install chromium)"
    if missing:
        (pytest.fail if required else pytest.skip)(f"the inspector's browser test needs {missing}")
    pw = sync_playwright().start()
    try:
        return pw, pw.chromium.launch(executable_path=exe, args=["--no-sandbox"])
    except Exception:
        pw.stop()
        raise


@pytest.fixture(scope="module")
def browser():
    pw, browser = _launch()
    yield browser
    browser.close()
    pw.stop()


@pytest.fixture(scope="module")
def ui_server(tmp_path_factory):
    with ServerProcess(tmp_path_factory.mktemp("store"), preset=None) as srv:
        yield srv


@pytest.fixture(scope="module")
def asked(browser, ui_server, page_path, tmp_path_factory):
    """The page after uploading the bundled page through the file picker and asking the question."""
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    page.goto(ui_server.url + "/ui")
    # selectors, not wait_for_function: the page's CSP (no eval) holds for the test's scripts too
    page.wait_for_selector("#models option", state="attached")
    page.fill("#model", MODEL)
    page.fill("#question", QUESTION)
    page.set_input_files("#file", str(page_path))
    page.wait_for_selector("#ledger td[data-field=plan_tokens]", timeout=120_000)
    page.click("#go")  # again, as a person would after the first encode: the answer the screenshot shows is warm
    page.wait_for_selector("#results:not([aria-busy])")
    assert page.text_content("#status").startswith("Answered in")
    shot = tmp_path_factory.mktemp("inspector") / "inspector.png"
    page.screenshot(path=str(shot), full_page=True)
    yield page, shot
    page.close()


def ledger(page) -> dict[str, str]:
    return page.eval_on_selector_all(
        "#ledger td", "tds => Object.fromEntries(tds.map(t => [t.dataset.field, t.textContent]))"
    )


def image_sha(page, selector: str) -> str:
    data = page.evaluate(
        "async (sel) => { const b = await (await fetch(document.querySelector(sel).src)).arrayBuffer();"
        " return Array.from(new Uint8Array(b)); }",
        selector,
    )
    return hashlib.sha256(bytes(data)).hexdigest()


@pytest.fixture(scope="module")
def tid(asked, ui_server, page_path) -> str:
    """The page's texture id, from the API: the same bytes again answer 200 (stored by the page's upload, by content
    hash) and encode nothing."""
    r = httpx.post(f"{ui_server.url}/v1/textures", content=page_path.read_bytes(), timeout=120)
    assert r.status_code == 200 and r.json()["created"] is False, r.text
    return r.json()["id"]


def n(text: str) -> int:
    return int(text.replace(",", ""))


@pytest.mark.slow
def test_question_shows_mosaic_pictures_and_the_apis_ledger(asked, ui_server, tid):
    page, shot = asked
    assert shot.stat().st_size > 10_000  # the screenshot the README shows is made here
    assert page.eval_on_selector("#mosaic", "i => i.complete && i.naturalWidth") > 0
    body = {**QUERY, "model": MODEL}
    api = httpx.post(f"{ui_server.url}/v1/textures/{tid}/prompt", json=body, timeout=60).json()["ledger"]
    shown = ledger(page)
    assert shown["model"] == api["model"] == MODEL and shown["rule"] == api["rule"]
    for field in ("plan_tokens", "image_tokens", "uniform_tokens"):
        assert n(shown[field]) == api[field], field
    assert api["plan_tokens"] < api["image_tokens"]
    assert shown["saving"] == f"{api['saving'] * 100:.1f} %"
    assert n(shown["pictures"]) == len(api["pictures"]) == page.locator("#pictures img").count() > 0
    sizes = page.eval_on_selector_all("#pictures img", "imgs => imgs.map(i => [i.naturalWidth, i.naturalHeight])")
    assert sizes == [p["sent"] for p in api["pictures"]]
    # the evidence: the API's most probable answer line, with its probability
    sel = httpx.post(f"{ui_server.url}/v1/textures/{tid}/select", json={**QUERY, "explain": True}, timeout=60).json()
    top = sel["evidence"][0]
    assert page.locator("#evidence li").first.text_content().startswith(f"{top['text']} · p = {top['probability']:.2f}")
    # the overlay is the API's for the same query, byte for byte
    want = httpx.get(f"{ui_server.url}/v1/textures/{tid}/overlay.png", params=QUERY)
    assert image_sha(page, "#overlay") == hashlib.sha256(want.content).hexdigest()
    # the request body for the model, downloadable
    with page.expect_download() as dl:
        page.click("#download")
    sent = json.loads(Path(dl.value.path()).read_text())
    assert sent["model"] == MODEL and sent["messages"]


@pytest.mark.slow
def test_a_point_on_the_overlay_changes_the_selection(asked, ui_server, tid):
    page, _ = asked
    before = image_sha(page, "#mosaic")
    box = page.locator("#overlay").bounding_box()
    page.mouse.click(box["x"] + 0.15 * box["width"], box["y"] + 0.2 * box["height"])  # top left: not the total
    page.wait_for_selector("#marks circle", state="attached")  # drawn with the answer
    page.wait_for_selector("#results:not([aria-busy])")
    x, y = (int(v) for v in page.input_value("#points").split(","))
    w, h = page.eval_on_selector("#overlay", "i => [i.naturalWidth, i.naturalHeight]")
    assert abs(x - 0.15 * w) <= w / 100 and abs(y - 0.2 * h) <= h / 100
    assert image_sha(page, "#mosaic") != before
    want = httpx.get(f"{ui_server.url}/v1/textures/{tid}/mosaic.png", params={**QUERY, "point": f"{x},{y}"})
    assert image_sha(page, "#mosaic") == hashlib.sha256(want.content).hexdigest()  # the API's, for the point
    page.click("#clear")
    page.wait_for_selector("#marks circle", state="detached")
    page.wait_for_selector("#results:not([aria-busy])")
    page.set_viewport_size({"width": 390, "height": 844})  # a phone: one column, nothing wider than the screen
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
    page.set_viewport_size({"width": 1280, "height": 1000})


@pytest.mark.slow
def test_a_corrupt_drop_shows_the_apis_error(browser, ui_server):
    page = browser.new_page(viewport={"width": 390, "height": 844})  # a phone
    page.goto(ui_server.url + "/ui")
    corrupt = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
    detail = httpx.post(f"{ui_server.url}/v1/textures", content=corrupt, timeout=60).json()["detail"]
    page.evaluate(
        """(bytes) => { const dt = new DataTransfer();
        dt.items.add(new File([new Uint8Array(bytes)], "broken.png", {type: "image/png"}));
        document.querySelector("#drop").dispatchEvent(new DragEvent("drop", {dataTransfer: dt, bubbles: true})); }""",
        list(corrupt),
    )
    page.wait_for_selector("#error:not([hidden])")
    assert page.text_content("#error") == detail
    # every control has a label (or its own text)
    unlabeled = page.eval_on_selector_all(
        "input, button, select",
        "els => els.filter(e => !(e.labels && e.labels.length) && !e.textContent.trim() "
        "&& !e.getAttribute('aria-label')).map(e => e.id)",
    )
    assert unlabeled == []
    page.close()


@pytest.mark.slow
def test_with_a_key_the_page_opens_and_sends_the_key_typed_into_it(browser, tmp_path, photo_path):
    with ServerProcess(tmp_path, env={"FOVEATE_API_KEY": "s3cret"}) as srv:
        page = browser.new_page()
        page.goto(srv.url + "/ui")
        page.wait_for_selector("#error:not([hidden])")  # the model list, asked without the key
        assert page.text_content("#error").startswith("missing or wrong API key")
        page.click("summary")
        page.fill("#key", "s3cret")
        page.dispatch_event("#key", "change")
        page.wait_for_selector("#models option", state="attached")
        page.set_input_files("#file", str(photo_path))
        page.wait_for_selector("#ledger td[data-field=plan_tokens]", timeout=60_000)
        assert page.is_hidden("#error")
        page.close()


@pytest.mark.slow
def test_a_pdf_shows_a_page_picker_and_the_documents_ledger(browser, ui_server, tmp_path):
    from ..document.test_document import PAGES, _pdf, _text_page

    pdf = tmp_path / "doc.pdf"
    pdf.write_bytes(_pdf([_text_page(ls) for ls in PAGES]))  # the total due is on page 2 of 3
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    page.goto(ui_server.url + "/ui")
    page.wait_for_selector("#models option", state="attached")
    page.fill("#model", MODEL)
    page.fill("#question", QUESTION)
    page.set_input_files("#file", str(pdf))
    page.wait_for_selector("#ledger td[data-field=document_tokens]", timeout=120_000)
    page.wait_for_selector("#results:not([aria-busy])")
    tid = httpx.post(f"{ui_server.url}/v1/textures", content=pdf.read_bytes(), timeout=120).json()["id"]
    sel = httpx.post(f"{ui_server.url}/v1/textures/{tid}/select", json={**QUERY, "explain": True}, timeout=60).json()
    best = max(sel["page_selections"], key=lambda p: p["num_tokens"])["page"] + 1
    assert best == 2 and page.is_visible("#page-pick")
    assert page.eval_on_selector_all("#page option", "os => os.map(o => o.value)") == ["1", "2", "3"]
    assert page.input_value("#page") == "2"  # the page with the most tokens is shown first
    api = httpx.post(f"{ui_server.url}/v1/textures/{tid}/prompt", json={**QUERY, "model": MODEL}, timeout=60).json()
    shown = ledger(page)
    for field in ("plan_tokens", "document_tokens"):
        assert n(shown[field]) == api["ledger"][field], field
    top = sel["evidence"][0]
    assert page.locator("#evidence li").first.text_content().startswith(f"Page {top['page'] + 1}: {top['text']}")
    for p in (2, 1):  # the overlay is the API's for the page shown, then for the page picked by hand
        if p == 1:
            page.select_option("#page", "1")
            page.wait_for_selector("#results:not([aria-busy])")
        want = httpx.get(f"{ui_server.url}/v1/textures/{tid}/overlay.png", params={**QUERY, "page": p}, timeout=60)
        assert want.status_code == 200 and image_sha(page, "#overlay") == hashlib.sha256(want.content).hexdigest()
    page.close()
