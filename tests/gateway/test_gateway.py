"""``foveate gateway`` with the official OpenAI and Anthropic SDKs as clients (unchanged but for ``base_url``), a real
gateway process, and the stand-in provider of :mod:`.provider` as the upstream (the hosted APIs are not reachable
here)."""

from __future__ import annotations

import json

import anthropic
import httpx
import numpy as np
import openai
import pytest

from foveate import load_image

from .conftest import CLIENT_KEY
from .helpers import counter, pictures, priced, whole_page

QUESTION = "What is the total amount due on this invoice?"
#: the 60 % target: at the default budget the forwarded pictures cost at most this share of the whole page
TARGET = 0.6


def oa(gateway, **kw) -> openai.OpenAI:
    return openai.OpenAI(base_url=gateway.url + "/v1", api_key=CLIENT_KEY, max_retries=0, **kw)


def an(gateway, **kw) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=gateway.url, api_key=CLIENT_KEY, max_retries=0, **kw)


def chat_messages(b64: str, question: str | None = QUESTION) -> list[dict]:
    content: list[dict] = [{"type": "image_url", "image_url": {"url": "data:image/png;base64," + b64}}]
    if question is not None:
        content.append({"type": "text", "text": question})
    return [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": content}]


def anthropic_messages(b64: str, question: str | None = QUESTION) -> list[dict]:
    content: list[dict] = [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64}}]
    if question is not None:
        content.append({"type": "text", "text": question})
    return [{"role": "user", "content": content}]


@pytest.fixture(scope="module")
def page(page_path) -> np.ndarray:
    return load_image(page_path)


@pytest.mark.parametrize("model", ["gpt-5.2", "gpt-4o"])
def test_openai_chat_question_on_a_form_page(gateway, provider, page, page_b64, model):
    r = oa(gateway).chat.completions.with_raw_response.create(
        model=model, messages=chat_messages(page_b64), temperature=0.2, max_tokens=50, user="u-1"
    )
    reply = r.parse()
    sent = provider.last().json()
    # the rest of the body arrives intact: fields, the system message, the question last in its turn
    assert (sent["model"], sent["temperature"], sent["max_tokens"], sent["user"]) == (model, 0.2, 50, "u-1")
    assert sent["messages"][0] == {"role": "system", "content": "Answer briefly."}
    user = sent["messages"][1]["content"]
    assert user[-1] == {"type": "text", "text": QUESTION}
    pics = pictures(sent, "openai-chat")
    assert 1 <= len(pics) and all(p["type"] == "text" for p in user[:-1:2])  # each picture after its line
    tokens, page_tokens = priced(model, pics), whole_page(model, page)
    assert tokens <= TARGET * page_tokens, (tokens, page_tokens)
    assert int(r.headers["x-foveate-sent-tokens"]) == tokens
    assert int(r.headers["x-foveate-image-tokens"]) == page_tokens
    assert r.headers["x-foveate-cache"] in ("hit", "miss")
    assert reply.choices[0].message.content == f"received {len(pics)} pictures"  # the reply passes through
    assert r.headers["x-request-id"] == "req_test"  # the upstream's own headers too
    assert_forwarded(r.http_request.headers, provider.last().headers)


def assert_forwarded(client: httpx.Headers, upstream: dict[str, str]) -> None:
    """Every header the SDK sent (credentials, ``anthropic-version``, ...) reached the upstream unchanged."""
    skip = {"host", "content-length", "connection", "accept-encoding"}
    sent = {k.lower(): v for k, v in client.items() if k.lower() not in skip}
    assert any(k in sent for k in ("authorization", "x-api-key")) and CLIENT_KEY in str(sent)
    assert {k: upstream.get(k) for k in sent} == sent


@pytest.mark.parametrize("model", ["claude-sonnet-4-6", "claude-opus-4-7"])
def test_anthropic_question_on_a_form_page(gateway, provider, page, page_b64, model):
    r = an(gateway).messages.with_raw_response.create(
        model=model, max_tokens=64, system="Answer briefly.", messages=anthropic_messages(page_b64)
    )
    reply = r.parse()
    sent = provider.last().json()
    assert (sent["model"], sent["max_tokens"], sent["system"]) == (model, 64, "Answer briefly.")
    assert sent["messages"][0]["content"][-1] == {"type": "text", "text": QUESTION}
    pics = pictures(sent, "anthropic")
    tokens, page_tokens = priced(model, pics), whole_page(model, page)
    assert 1 <= len(pics) and tokens <= TARGET * page_tokens, (tokens, page_tokens)
    assert int(r.headers["x-foveate-sent-tokens"]) == tokens
    assert int(r.headers["x-foveate-image-tokens"]) == page_tokens
    assert reply.content[0].text == f"received {len(pics)} pictures"
    assert_forwarded(r.http_request.headers, provider.last().headers)


def test_openai_responses(gateway, provider, page, page_b64):
    r = oa(gateway).responses.with_raw_response.create(
        model="gpt-5.2",
        input=[
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": QUESTION},
                    {"type": "input_image", "image_url": "data:image/png;base64," + page_b64, "detail": "auto"},
                ],
            }
        ],
    )
    sent = provider.last().json()
    pics = pictures(sent, "openai-responses")
    assert sent["input"][0]["content"][0] == {"type": "input_text", "text": QUESTION}
    assert priced("gpt-5.2", pics) <= TARGET * whole_page("gpt-5.2", page)
    assert int(r.headers["x-foveate-sent-tokens"]) == priced("gpt-5.2", pics)
    assert r.parse().output_text == f"received {len(pics)} pictures"


def test_streaming_is_relayed(gateway, provider, page_b64):
    stream = oa(gateway).chat.completions.create(model="gpt-5.2", messages=chat_messages(page_b64), stream=True)
    chunks = [c.choices[0].delta.content or "" for c in stream]
    n = len(pictures(provider.last().json(), "openai-chat"))
    assert provider.last().json()["stream"] is True
    assert len(chunks) >= 3 and "".join(chunks) == f"received {n} pictures"
    with an(gateway).messages.stream(
        model="claude-sonnet-4-6", max_tokens=32, messages=anthropic_messages(page_b64)
    ) as s:
        deltas = list(s.text_stream)
        final = s.get_final_message()
    n = len(pictures(provider.last().json(), "anthropic"))
    assert len(deltas) >= 3 and "".join(deltas) == f"received {n} pictures" == final.content[0].text


@pytest.mark.parametrize(
    ("how", "reason"),
    [("image-only", "no-text"), ("off", "off"), ("unknown-model", "unknown-model"), ("by-url", "no-picture")],
)
def test_passthrough_is_byte_for_byte(gateway, provider, page_b64, how, reason):
    messages = chat_messages(page_b64, None if how == "image-only" else QUESTION)
    if how == "by-url":
        messages[1]["content"][0]["image_url"]["url"] = "https://example.com/page.png"
    model = "my-own-vlm" if how == "unknown-model" else "gpt-5.2"
    headers = {"x-foveate": "off"} if how == "off" else {}
    r = oa(gateway).chat.completions.with_raw_response.create(model=model, messages=messages, extra_headers=headers)
    assert provider.last().body == r.http_request.content  # the bytes the SDK sent, unchanged
    assert r.headers["x-foveate-passthrough"] == reason
    assert "x-foveate" not in provider.last().headers  # the gateway's own header stays with the gateway


def test_anthropic_image_only_is_byte_for_byte(gateway, provider, page_b64):
    r = an(gateway).messages.with_raw_response.create(
        model="claude-sonnet-4-6", max_tokens=16, messages=anthropic_messages(page_b64, None)
    )
    assert provider.last().body == r.http_request.content
    assert r.headers["x-foveate-passthrough"] == "no-text"


def test_models_passthrough(gateway, provider):
    assert [m.id for m in oa(gateway).models.list()] == ["gpt-5.2"]
    assert provider.last().path == "/v1/models"
    assert provider.last().headers["authorization"] == f"Bearer {CLIENT_KEY}"


@pytest.mark.parametrize("path", ["/v1/../../etc/passwd", "/v1/..%2F..%2Fetc%2Fpasswd", "/v1/./models"])
def test_a_path_with_dot_segments_is_refused_not_forwarded(gateway, provider, path):
    """The path follows the upstream's base: ``..`` would climb out of it (httpx resolves it to ``/etc/passwd``).
    Sent as written (http.client does not resolve dot segments; httpx and curl do)."""
    import http.client

    before = len(provider.received)
    conn = http.client.HTTPConnection("127.0.0.1", int(gateway.url.rsplit(":", 1)[1]), timeout=30)
    conn.request("GET", path, headers={"authorization": f"Bearer {CLIENT_KEY}"})
    answer = conn.getresponse()
    assert answer.status == 400 and "'..'" in json.loads(answer.read())["error"]["message"]
    conn.close()
    assert len(provider.received) == before


@pytest.mark.parametrize("status", [429, 500])
def test_upstream_errors_are_relayed(gateway, page_b64, status):
    errors = {
        429: (openai.RateLimitError, anthropic.RateLimitError),
        500: (openai.InternalServerError, anthropic.InternalServerError),
    }
    with pytest.raises(errors[status][0]) as oe:
        oa(gateway).chat.completions.create(
            model="gpt-5.2", messages=chat_messages(page_b64), extra_headers={"x-test-answer": str(status)}
        )
    assert oe.value.status_code == status
    assert oe.value.body["message"] in ("rate limited (test)", "upstream broke (test)")
    with pytest.raises(errors[status][1]) as ae:
        an(gateway).messages.create(
            model="claude-sonnet-4-6",
            max_tokens=16,
            messages=anthropic_messages(page_b64),
            extra_headers={"x-test-answer": str(status)},
        )
    assert ae.value.status_code == status
    if status == 429:  # the rate-limit headers reach the client
        for e in (oe.value, ae.value):
            assert e.response.headers["retry-after"] == "7"
            assert e.response.headers["x-ratelimit-remaining-requests"] == "0"


def test_upstream_timeout_is_504(gateway, page_b64):
    with pytest.raises(openai.APIStatusError) as oe:
        oa(gateway).chat.completions.create(
            model="gpt-5.2", messages=chat_messages(page_b64), extra_headers={"x-test-answer": "slow"}
        )
    assert oe.value.status_code == 504 and "did not answer within 2 s" in oe.value.message
    with pytest.raises(anthropic.APIStatusError) as ae:
        an(gateway).messages.create(
            model="claude-sonnet-4-6",
            max_tokens=16,
            messages=anthropic_messages(page_b64),
            extra_headers={"x-test-answer": "slow"},
        )
    assert ae.value.status_code == 504 and ae.value.body["error"]["type"] == "timeout_error"


def test_credentials_are_never_logged_or_stored(gateway, provider, page_b64):
    oa(gateway).chat.completions.create(model="gpt-5.2", messages=chat_messages(page_b64))
    an(gateway).messages.create(model="claude-sonnet-4-6", max_tokens=16, messages=anthropic_messages(page_b64))
    log = gateway.log()
    lines = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    assert lines and {"model", "image_tokens", "sent_tokens", "foveate_ms", "status"} <= set(lines[-1])
    assert CLIENT_KEY not in log and QUESTION not in log  # no keys, no content
    for f in gateway.store.rglob("*"):
        if f.is_file():
            assert CLIENT_KEY.encode() not in f.read_bytes()


@pytest.mark.parametrize("route", ["/v1/chat/completions", "/v1/messages", "/v1/responses"])
def test_bad_bodies_answer_400_in_the_providers_shape(gateway, route):
    anthropic_shape = route == "/v1/messages"
    deep = b'{"model": "gpt-5.2", "messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"  # used to log a traceback
    for body in (
        b"{not json",
        b"[1, 2]",
        b'{"messages": []}',
        b'{"model": "gpt-5.2", "messages": 3, "input": 3}',
        deep,
    ):
        r = httpx.post(gateway.url + route, content=body, headers={"content-type": "application/json"}, timeout=30)
        assert r.status_code == 400, (body, r.text)
        doc = r.json()
        if anthropic_shape:
            assert doc["type"] == "error" and doc["error"]["type"] == "invalid_request_error"
        else:
            assert doc["error"]["type"] == "invalid_request_error" and doc["error"]["message"]


def test_a_lone_surrogate_in_the_question_is_replanned_and_forwarded_as_sent(gateway, provider, page_b64):
    """JSON may carry ``\\ud800`` (a lone surrogate), which UTF-8 cannot: the gateway still re-plans the picture and
    forwards the question's escape as it came (re-serialising it used to fail, log a traceback and pass through)."""
    body = {"model": "gpt-5.2", "messages": chat_messages(page_b64, "What is the date \ud800 on this form?")}
    raw = json.dumps(body).encode()  # ASCII: the surrogate as the escape \ud800 (httpx's json= cannot send it)
    r = httpx.post(
        gateway.url + "/v1/chat/completions", content=raw, headers={"content-type": "application/json"}, timeout=120
    )
    assert r.status_code == 200, r.text
    assert "x-foveate-passthrough" not in r.headers and int(r.headers["x-foveate-sent-tokens"]) > 0
    sent = provider.last().body
    texts = [p["text"] for p in json.loads(sent)["messages"][1]["content"] if p["type"] == "text"]
    assert b"\\ud800" in sent and texts[-1] == "What is the date \ud800 on this form?"  # after the captions
    assert "re-planning failed" not in gateway.log()


def test_bad_and_oversized_pictures_answer_4xx_through_the_sdks(gateway, provider):
    import base64
    import io

    from PIL import Image

    before = len(provider.received)
    with pytest.raises(openai.BadRequestError) as e:
        oa(gateway).chat.completions.create(model="gpt-5.2", messages=chat_messages("bm90IGEgcGljdHVyZQ=="))
    assert "could not be read" in e.value.message
    with pytest.raises(anthropic.BadRequestError):
        an(gateway).messages.create(model="claude-sonnet-4-6", max_tokens=8, messages=anthropic_messages("%%%"))
    buf = io.BytesIO()
    Image.new("RGB", (2100, 2100), "white").save(buf, "PNG")  # 4.4 M pixels, over the gateway's --max-pixels 4 M
    big = base64.b64encode(buf.getvalue()).decode()
    with pytest.raises(openai.APIStatusError) as e:
        oa(gateway).chat.completions.create(model="gpt-5.2", messages=chat_messages(big))
    assert e.value.status_code == 413 and "too large" in e.value.message
    with pytest.raises(anthropic.APIStatusError) as ae:
        an(gateway).messages.create(
            model="claude-sonnet-4-6", max_tokens=8, messages=anthropic_messages("A" * 5_000_000)
        )
    assert ae.value.status_code == 413 and ae.value.body["error"]["type"] == "request_too_large"
    assert len(provider.received) == before  # none of them reached the upstream


def test_metrics_sum_the_headers(gateway, page_b64):
    image0 = counter(gateway.url, "foveate_gateway_image_tokens_total")
    sent0 = counter(gateway.url, "foveate_gateway_sent_tokens_total")
    r = oa(gateway).chat.completions.with_raw_response.create(model="gpt-5.2", messages=chat_messages(page_b64))
    assert counter(gateway.url, "foveate_gateway_image_tokens_total") - image0 == int(
        r.headers["x-foveate-image-tokens"]
    )
    assert counter(gateway.url, "foveate_gateway_sent_tokens_total") - sent0 == int(r.headers["x-foveate-sent-tokens"])


def test_a_picture_too_small_to_save_on_passes_through(gateway, provider):
    import base64
    import io

    from PIL import Image, ImageDraw

    im = Image.new("RGB", (64, 40), "white")
    ImageDraw.Draw(im).text((4, 12), "A-17", fill="black")
    buf = io.BytesIO()
    im.save(buf, "PNG")
    b64 = base64.b64encode(buf.getvalue()).decode()
    r = oa(gateway).chat.completions.with_raw_response.create(model="gpt-5.2", messages=chat_messages(b64, "Code?"))
    assert r.headers["x-foveate-passthrough"] == "no-saving"
    assert provider.last().body == r.http_request.content
    assert r.headers["x-foveate-sent-tokens"] == r.headers["x-foveate-image-tokens"]


def test_only_the_latest_user_turn_is_replanned(gateway, provider, page_b64):
    first = chat_messages(page_b64, "What is the invoice number?")[1]
    latest = chat_messages(page_b64, QUESTION)[1]
    messages = [first, {"role": "assistant", "content": "It is 1042."}, latest]
    oa(gateway).chat.completions.create(model="gpt-5.2", messages=[latest])  # the page seen before (any test order)
    r = oa(gateway).chat.completions.with_raw_response.create(model="gpt-5.2", messages=messages)
    sent = provider.last().json()["messages"]
    assert sent[:2] == messages[:2]  # the earlier turn's picture as the client sent it
    assert len(pictures({"messages": sent}, "openai-chat")) >= 1 and sent[2] != latest
    assert r.headers["x-foveate-cache"] == "hit"  # the page was seen before
    # a latest turn without a picture: nothing to do, whatever came before
    messages = [first, {"role": "assistant", "content": "It is 1042."}, {"role": "user", "content": "And the date?"}]
    r = oa(gateway).chat.completions.with_raw_response.create(model="gpt-5.2", messages=messages)
    assert r.headers["x-foveate-passthrough"] == "no-picture"
    assert provider.last().body == r.http_request.content
