"""``--budget auto``: on the form page the budget is one of 64, 144, 273, 576 and the forwarded pictures show the
answer line legibly (checked from what the upstream received: each picture's introduction names its region, its
pixels and the model's rule give the scale the model sees it at); a photo question without text gets 273, the same
pictures as a gateway with the fixed default budget."""

from __future__ import annotations

import base64
import io
import re

import numpy as np
import openai
import pytest
from PIL import Image

from foveate import encode
from foveate.core.config import LEGIBLE_PX
from foveate.gateway.budget import BUDGETS, auto_budget
from foveate.query.text.layout import text_index
from foveate.vlm import model_rule
from foveate.weights import load_weights

from .conftest import CLIENT_KEY
from .test_gateway import QUESTION, chat_messages

REGION = re.compile(r"the region x (\d+)-(\d+), y (\d+)-(\d+) of the page")
WHOLE = re.compile(r"the whole (\d+)x(\d+) px page")


def ask(gw, b64: str, question: str, model: str = "gpt-5.2"):
    client = openai.OpenAI(base_url=gw.url + "/v1", api_key=CLIENT_KEY, max_retries=0)
    return client.chat.completions.with_raw_response.create(model=model, messages=chat_messages(b64, question))


def seen_regions(content: list[dict], model: str) -> list[tuple[tuple[int, int, int, int], float]]:
    """(region of the page, source pixels per pixel the model sees) of every forwarded picture, from its
    introduction line and its pixels under the model's rule."""
    rule = model_rule(model)
    out = []
    for line, pic in zip(content[:-1:2], content[1::2]):
        assert line["type"] == "text" and pic["type"] == "image_url"
        with Image.open(io.BytesIO(base64.b64decode(pic["image_url"]["url"].split(",", 1)[1]))) as im:
            w, h = im.size
        _, vw, vh = rule.price(np.array([w]), np.array([h]), pic["image_url"].get("detail"))
        if m := REGION.search(line["text"]):
            x0, x1, y0, y1 = map(int, m.groups())
        else:
            m = WHOLE.search(line["text"])
            assert m, line["text"]
            x0, y0, x1, y1 = 0, 0, int(m.group(1)), int(m.group(2))
        out.append(((x0, y0, x1, y1), max((x1 - x0) / int(vw[0]), (y1 - y0) / int(vh[0]))))
    return out


@pytest.fixture(scope="module")
def answer_line(page_path) -> tuple[tuple[float, ...], float]:
    """The OCR line of the amount on the "Total due" row (its box and print height): the answer to QUESTION."""
    index = text_index(encode(page_path))
    assert index is not None
    label = next(ln for ln in index.lines if ln.text.lower().startswith("total due"))
    same_row = [ln for ln in index.lines if ln.box[0] > label.box[2] and abs(ln.box[1] - label.box[1]) < 10]
    amount = min(same_row, key=lambda ln: ln.box[0])
    assert "$" in amount.text
    return tuple(amount.box), (amount.box[3] - amount.box[1]) * load_weights("default").text.height


def test_auto_budget_on_the_form_page_keeps_the_answer_legible(gateway_opts, provider, page_b64, answer_line):
    r = ask(gateway_opts, page_b64, QUESTION)
    budget = int(r.headers["x-foveate-budget"])
    assert budget in BUDGETS
    box, print_h = answer_line
    regions = seen_regions(provider.last().json()["messages"][1]["content"], "gpt-5.2")
    legible = [
        (x0, y0, x1, y1)
        for (x0, y0, x1, y1), scale in regions
        if print_h / scale >= LEGIBLE_PX and x0 <= box[0] and y0 <= box[1] and box[2] <= x1 and box[3] <= y1
    ]
    assert legible, (budget, regions, box)
    assert int(r.headers["x-foveate-sent-tokens"]) < int(r.headers["x-foveate-image-tokens"])


def test_a_photo_question_without_text_gets_273(gateway_opts, gateway, provider, photo_path):
    b64 = base64.b64encode(photo_path.read_bytes()).decode()
    question = "What animal is in the picture?"
    r = ask(gateway_opts, b64, question)
    assert r.headers["x-foveate-budget"] == "273"
    auto = provider.last().json()["messages"][1]["content"]
    fixed = ask(gateway, b64, question)  # the fixed default budget: the same pictures
    assert fixed.headers["x-foveate-budget"] == "273"
    assert provider.last().json()["messages"][1]["content"] == auto


def test_the_auto_budget_never_exceeds_the_whole_picture(photo_path):
    tex = encode(photo_path, preset="fast")  # no text channel: no likely line
    weights = load_weights("default")
    for model in ("gpt-5.2", "claude-sonnet-4-6", "gpt-4o"):
        rule = model_rule(model)
        whole = rule.whole(tex.image_size[1], tex.image_size[0])[1].tokens
        chosen = auto_budget(tex, "What animal is this?", rule, weights)
        assert chosen.budget == max(b for b in BUDGETS if b <= min(whole, 273)), (model, whole)
        assert chosen.plan.tokens <= whole


def test_the_auto_budget_of_a_document_is_the_smallest_that_shows_its_answer_page(tmp_path):
    """One budget across a PDF's pages: the answer's page (2 of 3) is the one planned for, its likely lines are legible
    in that page's plan, no smaller candidate shows them, and the plan never costs more than every page whole."""
    from foveate.document.prompt import plan_document
    from foveate.document.select import select_document
    from foveate.gateway.budget import LEGIBLE_SHARE, auto_document_budget, legible_shares, likely_lines

    from .test_documents import ANSWER, make_pdf
    from .test_documents import QUESTION as DOC_QUESTION

    (tmp_path / "d.pdf").write_bytes(make_pdf())
    doc = encode(tmp_path / "d.pdf")
    weights, rule = load_weights("default"), model_rule("gpt-5.2")
    chosen = auto_document_budget(doc, DOC_QUESTION, rule, weights)
    page = ANSWER[0] - 1
    assert chosen.budget in BUDGETS and int(np.argmax(chosen.selection.relevance)) == page, chosen.why
    boxes, heights = likely_lines(doc.pages[page], DOC_QUESTION, weights)
    assert len(boxes) and any("1,234" in ln.text for ln in text_index(doc.pages[page]).lines)

    def shows(budget: int) -> bool:
        plan = plan_document(select_document(doc, DOC_QUESTION, budget, weights=weights), rule)
        mine = [p for i, p in plan.plans if i == page]
        return bool(mine) and bool((legible_shares(mine[0], boxes, heights) >= LEGIBLE_SHARE).all())

    assert shows(chosen.budget) and not any(shows(b) for b in BUDGETS if b < chosen.budget), chosen.why
    assert 0 < chosen.plan.tokens <= chosen.plan.document_tokens
