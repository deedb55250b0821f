"""``--replan-history``: the pictures of earlier user turns re-planned for the latest turn's question (and served by
the encode cache), against the default, where they are forwarded byte for byte."""

from __future__ import annotations

import anthropic
import openai

from .conftest import CLIENT_KEY
from .helpers import counter, pictures
from .test_gateway import anthropic_messages, chat_messages

FIRST, LATEST = "What is the invoice number?", "What is the date?"
ENCODES = "foveate_gateway_encodes_total"


def oa(gw) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.url + "/v1", api_key=CLIENT_KEY, max_retries=0)


def conversation(first_turn: dict) -> list[dict]:
    return [first_turn, {"role": "assistant", "content": "It is 1042."}, {"role": "user", "content": LATEST}]


def test_an_earlier_turns_picture_is_replanned_for_the_latest_question(gateway_opts, provider, page_b64):
    # the reference: the page asked about directly in the latest turn (also its one encode)
    direct = oa(gateway_opts).chat.completions.with_raw_response.create(
        model="gpt-5.2", messages=chat_messages(page_b64, LATEST)
    )
    want = pictures(provider.last().json(), "openai-chat")
    encodes = counter(gateway_opts.url, ENCODES)
    messages = conversation(chat_messages(page_b64, FIRST)[1])
    r = oa(gateway_opts).chat.completions.with_raw_response.create(model="gpt-5.2", messages=messages)
    sent = provider.last().json()["messages"]
    assert sent[1:] == messages[1:]  # the answer and the latest turn as sent
    earlier = sent[0]["content"]
    assert earlier[-1] == {"type": "text", "text": FIRST}  # the earlier turn keeps its own text
    got = pictures({"messages": [sent[0]]}, "openai-chat")
    assert got == want  # planned for the latest question, as if the page came with it
    assert int(r.headers["x-foveate-sent-tokens"]) == int(direct.headers["x-foveate-sent-tokens"])
    assert int(r.headers["x-foveate-sent-tokens"]) < int(r.headers["x-foveate-image-tokens"])
    assert r.headers["x-foveate-cache"] == "hit" and "x-foveate-passthrough" not in r.headers
    assert counter(gateway_opts.url, ENCODES) == encodes  # no second encode


def test_earlier_and_latest_pictures_anthropic(gateway_opts, provider, page_b64):
    first = anthropic_messages(page_b64, FIRST)[0]
    latest = anthropic_messages(page_b64, LATEST)[0]
    messages = [first, {"role": "assistant", "content": "It is 1042."}, latest]
    client = anthropic.Anthropic(base_url=gateway_opts.url, api_key=CLIENT_KEY, max_retries=0)
    r = client.messages.with_raw_response.create(model="claude-sonnet-4-6", max_tokens=16, messages=messages)
    sent = provider.last().json()["messages"]
    both = [pictures({"messages": [m]}, "anthropic") for m in (sent[0], sent[2])]
    assert both[0] == both[1] and both[0]  # the same page, planned for the same (latest) question in both turns
    assert sent[0] != first and r.headers["x-foveate-cache"] == "hit"


def test_without_the_option_earlier_turns_pass_byte_for_byte(gateway, provider, page_b64):
    messages = conversation(chat_messages(page_b64, FIRST)[1])
    r = oa(gateway).chat.completions.with_raw_response.create(model="gpt-5.2", messages=messages)
    assert r.headers["x-foveate-passthrough"] == "no-picture"
    assert provider.last().body == r.http_request.content
