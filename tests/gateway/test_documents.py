"""PDFs through ``foveate gateway``: an Anthropic ``document`` block, an OpenAI chat ``file`` part and a Responses
``input_file`` part, sent by the official SDKs (unchanged but for ``base_url``) to a real gateway process in front of
the loopback stand-in provider (the hosted APIs are not reachable here).

The PDF is written in the test with reportlab: three pages, the answer on page 2 at a place known in points.  The
references are independent of the gateway: the pages rendered here with PDFium at the gateway's dpi and priced under
the model's rule (what the provider bills for the PDF's page pictures; its text part comes on top), and where
reportlab drew the answer."""

from __future__ import annotations

import base64
import io
import re

import anthropic
import httpx
import numpy as np
import openai
import pypdfium2 as pdfium
import pytest
from PIL import Image
from reportlab.lib import pdfencrypt
from reportlab.pdfbase.pdfmetrics import stringWidth
from reportlab.pdfgen import canvas

from foveate.document.load import DEFAULT_DPI
from foveate.vlm import model_rule

from .conftest import CLIENT_KEY
from .helpers import counter

QUESTION = "What is the total due on the invoice?"
W_PT, H_PT = 612, 792
#: (x, y baseline, text) per page, in points; the answer is on page 2
PAGES = [
    [(72, 720, "Meeting notes for the spring planning session"), (72, 690, "Attendees: Alice, Bob and Carol")]
    + [(72, 650 - 24 * k, f"Agenda item {k + 1}: the roadmap for the next quarter") for k in range(8)],
    [(72, 720, "INVOICE"), (72, 690, "Invoice number: 12345"), (72, 660, "Customer: Northwind Traders")]
    + [(72, 630 - 24 * k, f"Line {k + 1}: consulting services, 8 hours") for k in range(6)]
    + [(72, 470, "Total due: $ 1,234.00")],
    [(72, 720, "Appendix: shipping terms and conditions")]
    + [(72, 690 - 24 * k, f"Clause {k + 1}: goods travel at the buyer's risk") for k in range(8)],
]
ANSWER = (2, 72, 470, "Total due: $ 1,234.00")  # page (1-based), x, y, text
FONT, SIZE = "Helvetica", 12


def make_pdf(pages=PAGES, encrypt=None) -> bytes:
    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=(W_PT, H_PT), encrypt=encrypt)
    for lines in pages:
        c.setFont(FONT, SIZE)
        for x, y, s in lines:
            c.drawString(x, y, s)
        c.showPage()
    c.save()
    return buf.getvalue()


@pytest.fixture(scope="module")
def pdf() -> bytes:
    return make_pdf()


@pytest.fixture(scope="module")
def renders(pdf) -> list[np.ndarray]:
    """The pages rendered here with PDFium at the gateway's dpi (the reference pixels)."""
    doc = pdfium.PdfDocument(pdf)
    try:
        return [np.asarray(doc[i].render(scale=DEFAULT_DPI / 72).to_pil().convert("RGB")) for i in range(len(doc))]
    finally:
        doc.close()


def billed_pictures(model: str, renders: list[np.ndarray]) -> int:
    """What the provider bills for the PDF's page pictures under the model's rule (its text part is extra)."""
    rule = model_rule(model)
    return sum(rule.whole(r.shape[1], r.shape[0])[1].tokens for r in renders)


def answer_point() -> tuple[int, float, float]:
    """(page 0-based, x, y) in rendered pixels of the middle of the answer's text, from where reportlab drew it."""
    page, x, y, text = ANSWER
    s = DEFAULT_DPI / 72
    mid_x = x + stringWidth(text, FONT, SIZE) / 2
    mid_y = H_PT - (y + SIZE * 0.35)  # the middle of the capitals, above the baseline
    return page - 1, mid_x * s, mid_y * s


def forwarded(body: dict, api: str) -> list[tuple[str, np.ndarray, str | None]]:
    """(line, picture, option) of every picture in the latest user turn of a forwarded body, each after its line."""
    key = "input" if api == "openai-responses" else "messages"
    content = [m for m in body[key] if m.get("role") == "user"][-1]["content"]
    out = []
    for prev, part in zip(content, content[1:]):
        if part["type"] == "image":
            data, option = part["source"]["data"], None
        elif part["type"] == "image_url":
            data, option = part["image_url"]["url"].split(",", 1)[1], part["image_url"].get("detail")
        elif part["type"] == "input_image":
            data = part["image_url"].split(",", 1)[1]
            option = part.get("detail") if part.get("detail") != "auto" else None
        else:
            continue
        with Image.open(io.BytesIO(base64.b64decode(data))) as im:
            out.append((prev["text"], np.asarray(im.convert("RGB")), option))
    return out


REGION = re.compile(r"the region x (\d+)-(\d+), y (\d+)-(\d+) of the page, at full resolution")
PART = re.compile(r"at x (\d+)-(\d+), y (\d+)-(\d+) of this picture: " + REGION.pattern)


def shows_answer(pics, renders) -> bool:
    """A picture of the answer's page whose line names a region at full resolution holding the answer's middle --
    the whole picture, or one part of a composite picture -- and whose pixels there are that region of the reference
    render."""
    page, ax, ay = answer_point()
    for line, arr, _ in pics:
        if not line.startswith(f"Page {page + 1} of {len(renders)}."):
            continue
        parts = [tuple(map(int, m)) for m in PART.findall(line)]  # (px0, px1, py0, py1, x0, x1, y0, y1)
        if not parts:
            whole = [tuple(map(int, m)) for m in REGION.findall(line)]
            parts = [(0, arr.shape[1], 0, arr.shape[0], *whole[0])] if len(whole) == 1 else []
        for px0, px1, py0, py1, x0, x1, y0, y1 in parts:
            if not (x0 <= ax <= x1 and y0 <= ay <= y1):
                continue
            shown = arr[py0:py1, px0:px1].astype(np.float32)
            ref = Image.fromarray(renders[page][y0:y1, x0:x1]).resize((shown.shape[1], shown.shape[0]), Image.BILINEAR)
            if np.abs(np.asarray(ref, np.float32) - shown).mean() < 8:
                return True
    return False


def priced(model: str, pics) -> int:
    rule = model_rule(model)
    return sum(rule.tokens(a.shape[1], a.shape[0], option) for _, a, option in pics)


def oa(gateway) -> openai.OpenAI:
    return openai.OpenAI(base_url=gateway.url + "/v1", api_key=CLIENT_KEY, max_retries=0)


def an(gateway) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=gateway.url, api_key=CLIENT_KEY, max_retries=0)


def chat_file(pdf: bytes, **file) -> dict:
    spec = file or {
        "filename": "invoice.pdf",
        "file_data": "data:application/pdf;base64," + base64.b64encode(pdf).decode(),
    }
    return {"type": "file", "file": spec}


def anthropic_document(pdf: bytes) -> dict:
    source = {"type": "base64", "media_type": "application/pdf", "data": base64.b64encode(pdf).decode()}
    return {"type": "document", "source": source}


def send(gateway, api: str, model: str, part: dict):
    """The raw response of one request whose latest user turn is the PDF part and the question."""
    if api == "anthropic":
        content = [part, {"type": "text", "text": QUESTION}]
        return an(gateway).messages.with_raw_response.create(
            model=model, max_tokens=32, messages=[{"role": "user", "content": content}]
        )
    if api == "openai-responses":
        content = [{"type": "input_text", "text": QUESTION}, part]
        return oa(gateway).responses.with_raw_response.create(model=model, input=[{"role": "user", "content": content}])
    content = [part, {"type": "text", "text": QUESTION}]
    return oa(gateway).chat.completions.with_raw_response.create(
        model=model, messages=[{"role": "user", "content": content}]
    )


def part_of(api: str, pdf: bytes) -> dict:
    if api == "anthropic":
        return anthropic_document(pdf)
    if api == "openai-responses":
        data = "data:application/pdf;base64," + base64.b64encode(pdf).decode()
        return {"type": "input_file", "filename": "invoice.pdf", "file_data": data}
    return chat_file(pdf)


@pytest.mark.parametrize(
    ("api", "model"), [("anthropic", "claude-opus-4-7"), ("openai-chat", "gpt-5.2"), ("openai-responses", "gpt-5.2")]
)
def test_a_pdf_is_replaced_by_the_pictures_of_its_answer(gateway, provider, pdf, renders, api, model):
    r = send(gateway, api, model, part_of(api, pdf))
    body = provider.last().json()
    text = provider.last().body.decode()
    assert "application/pdf" not in text and "JVBERi0" not in text  # the PDF itself is gone
    pics = forwarded(body, api)
    reference = billed_pictures(model, renders)
    tokens = priced(model, pics)
    assert pics and tokens <= reference, (tokens, reference)
    assert all(line.startswith("Page ") for line, _, _ in pics)  # each picture after the line naming its page
    assert shows_answer(pics, renders)
    assert int(r.headers["x-foveate-image-tokens"]) == reference
    assert int(r.headers["x-foveate-sent-tokens"]) == tokens
    assert r.headers["x-foveate-cache"] in ("hit", "miss") and r.headers["x-foveate-budget"] == "273"
    assert "x-foveate-passthrough" not in r.headers


def test_the_same_pdf_is_encoded_once(gateway, provider, pdf):
    send(gateway, "openai-chat", "gpt-5.2", part_of("openai-chat", pdf))  # encoded (or found) here
    before = counter(gateway.url, "foveate_gateway_encodes_total")
    r = send(gateway, "anthropic", "claude-opus-4-7", part_of("anthropic", pdf))  # the same bytes, another route
    assert r.headers["x-foveate-cache"] == "hit"
    bare = {"filename": "invoice.pdf", "file_data": base64.b64encode(pdf).decode()}  # bare base64, no data URL
    r = send(gateway, "openai-chat", "gpt-5.2", chat_file(pdf, **bare))
    assert r.headers["x-foveate-cache"] == "hit" and "JVBERi0" not in provider.last().body.decode()
    assert counter(gateway.url, "foveate_gateway_encodes_total") == before


@pytest.mark.parametrize("how", ["file-id", "url", "encrypted", "citations", "text-file", "chat-text"])
def test_pdfs_foveate_does_not_take_pass_byte_for_byte(gateway, provider, how):
    if how == "file-id":
        r = send(gateway, "openai-chat", "gpt-5.2", chat_file(b"", file_id="file-abc123"))
        reason = "no-picture"
    elif how == "url":
        part = {"type": "document", "source": {"type": "url", "url": "https://example.com/invoice.pdf"}}
        r, reason = send(gateway, "anthropic", "claude-opus-4-7", part), "no-picture"
    elif how == "encrypted":
        locked = make_pdf(encrypt=pdfencrypt.StandardEncryption("pw"))
        r, reason = send(gateway, "anthropic", "claude-opus-4-7", anthropic_document(locked)), "error"
    elif how == "citations":
        part = {**anthropic_document(make_pdf()), "citations": {"enabled": True}}
        r, reason = send(gateway, "anthropic", "claude-opus-4-7", part), "no-picture"
    elif how == "chat-text":  # another file type, not even base64: left alone, never a 400
        part = chat_file(b"", filename="notes.txt", file_data="data:text/plain,Total due: 5")
        r, reason = send(gateway, "openai-chat", "gpt-5.2", part), "no-picture"
    else:
        data = "data:text/plain;base64," + base64.b64encode(b"Total due: 5").decode()
        part = {"type": "input_file", "filename": "notes.txt", "file_data": data}
        r, reason = send(gateway, "openai-responses", "gpt-5.2", part), "no-picture"
    assert provider.last().body == r.http_request.content  # the bytes the SDK sent, unchanged
    assert r.headers["x-foveate-passthrough"] == reason
    assert r.status_code == 200


def test_a_broken_pdf_is_a_400_in_the_providers_shape(gateway, provider, pdf):
    before = len(provider.received)
    with pytest.raises(anthropic.BadRequestError) as ae:
        send(gateway, "anthropic", "claude-opus-4-7", anthropic_document(b"%PDF-1.7\n" + bytes(range(256)) * 4))
    assert "could not be read" in ae.value.message
    with pytest.raises(openai.BadRequestError):
        send(
            gateway,
            "openai-chat",
            "gpt-5.2",
            chat_file(b"", filename="x.pdf", file_data="data:application/pdf;base64,%%"),
        )
    assert len(provider.received) == before
    assert httpx.get(gateway.url + "/healthz", timeout=10).status_code == 200


def test_a_pdf_by_url_of_a_listed_host_is_fetched_and_replanned(gateway_opts, provider, picture_host, pdf, renders):
    picture_host.pdf = pdf
    url = picture_host.url("/doc.pdf")
    part = {"type": "document", "source": {"type": "url", "url": url}}
    r = send(gateway_opts, "anthropic", "claude-opus-4-7", part)
    pics = forwarded(provider.last().json(), "anthropic")
    assert "x-foveate-passthrough" not in r.headers and url not in provider.last().body.decode()
    assert shows_answer(pics, renders) and priced("claude-opus-4-7", pics) <= billed_pictures(
        "claude-opus-4-7", renders
    )
    part = {"type": "input_file", "file_url": url}
    r = send(gateway_opts, "openai-responses", "gpt-5.2", part)
    assert r.headers["x-foveate-cache"] == "hit" and shows_answer(
        forwarded(provider.last().json(), "openai-responses"), renders
    )


def test_budget_auto_chooses_a_pdfs_budget(gateway_opts, provider, pdf, renders):
    """``--budget auto`` on a PDF: one of the candidate budgets, chosen for the answer's page (no longer the fixed 273),
    the answer still shown, under the pages' bill."""
    from foveate.gateway.budget import BUDGETS

    r = send(gateway_opts, "openai-chat", "gpt-5.2", part_of("openai-chat", pdf))
    assert int(r.headers["x-foveate-budget"]) in BUDGETS
    pics = forwarded(provider.last().json(), "openai-chat")
    assert pics and shows_answer(pics, renders)
    assert priced("gpt-5.2", pics) <= billed_pictures("gpt-5.2", renders)
