"""The gateway's encode cache through the wire: a picture seen before is not encoded again (by its bytes, and by its
content in another encoding), and 16 concurrent clients on a new picture share one encode."""

from __future__ import annotations

import base64
import io
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import openai
import pytest
from PIL import Image

from foveate import load_image

from .conftest import CLIENT_KEY
from .helpers import counter, pictures
from .test_gateway import chat_messages

ENCODES = "foveate_gateway_encodes_total"


def variant(page_path, seed: int, compress: int = 6) -> str:
    """The form page with a few pixels changed (a picture the gateway has not seen), as base64 PNG."""
    rgb = load_image(page_path).copy()
    rng = np.random.default_rng(seed)
    rgb[rng.integers(0, rgb.shape[0], 8), rng.integers(0, rgb.shape[1], 8)] = rng.integers(0, 255, (8, 3))
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, "PNG", compress_level=compress)
    return base64.b64encode(buf.getvalue()).decode()


def ask(gateway, b64: str, question: str):
    client = openai.OpenAI(base_url=gateway.url + "/v1", api_key=CLIENT_KEY, max_retries=0)
    t0 = time.perf_counter()
    r = client.chat.completions.with_raw_response.create(model="gpt-5.2", messages=chat_messages(b64, question))
    return r, time.perf_counter() - t0


def test_second_question_on_a_picture_needs_no_encode(gateway, page_path):
    b64 = variant(page_path, 1)
    encodes = counter(gateway.url, ENCODES)
    first, t_miss = ask(gateway, b64, "What is the invoice number?")
    second, t_hit = ask(gateway, b64, "Who is the invoice addressed to?")
    assert counter(gateway.url, ENCODES) - encodes == 1
    assert (first.headers["x-foveate-cache"], second.headers["x-foveate-cache"]) == ("miss", "hit")
    assert t_hit <= 0.5 * t_miss, (t_hit, t_miss)
    # the same pixels in another encoding (other bytes): found by content, no encode
    again, _ = ask(gateway, variant(page_path, 1, compress=1), "What is the date?")
    assert again.headers["x-foveate-cache"] == "hit"
    assert counter(gateway.url, ENCODES) - encodes == 1


@pytest.mark.slow
def test_16_concurrent_clients_share_one_encode(gateway, provider, page_path):
    b64 = variant(page_path, 2)
    encodes = counter(gateway.url, ENCODES)
    received = len(provider.received)
    questions = [f"What is written in line {i + 1} of the table?" for i in range(16)]
    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda q: ask(gateway, b64, q)[0], questions))
    assert [a.status_code for a in answers] == [200] * 16
    assert counter(gateway.url, ENCODES) - encodes == 1
    assert sum(a.headers["x-foveate-cache"] == "miss" for a in answers) >= 1
    bodies = [r.json() for r in provider.received[received:]]
    assert len(bodies) == 16
    got = sorted(b["messages"][1]["content"][-1]["text"] for b in bodies)
    assert got == sorted(questions)  # each client's own question, each re-planned
    for body, a in zip(bodies, answers):
        assert pictures(body, "openai-chat")
        assert int(a.headers["x-foveate-sent-tokens"]) < int(a.headers["x-foveate-image-tokens"])
