"""What the gateway tests read back: the pictures a forwarded body carries, priced under a model's rule, and the
gateway's ``/metrics`` counters."""

from __future__ import annotations

import base64
import io
import re

import httpx
import numpy as np
from PIL import Image

from foveate.vlm import model_rule


def size_of(b64: str) -> tuple[int, int]:
    with Image.open(io.BytesIO(base64.b64decode(b64))) as im:
        return im.size


def pictures(body: dict, api: str) -> list[tuple[tuple[int, int], str | None]]:
    """(size, option) of every picture in the latest user message of a forwarded body."""
    if api == "openai-responses":
        content = [m for m in body["input"] if m.get("role") == "user"][-1]["content"]
        return [
            (size_of(p["image_url"].split(",", 1)[1]), p.get("detail") if p.get("detail") != "auto" else None)
            for p in content
            if p["type"] == "input_image"
        ]
    content = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
    if api == "anthropic":
        return [(size_of(p["source"]["data"]), None) for p in content if p["type"] == "image"]
    return [
        (size_of(p["image_url"]["url"].split(",", 1)[1]), p["image_url"].get("detail"))
        for p in content
        if p["type"] == "image_url"
    ]


def priced(model: str, pics: list[tuple[tuple[int, int], str | None]]) -> int:
    """Tokens the model's provider bills for these pictures (its rule in the model table)."""
    rule = model_rule(model)
    return sum(rule.tokens(w, h, option) for (w, h), option in pics)


def whole_page(model: str, page: np.ndarray) -> int:
    rule = model_rule(model)
    h, w = page.shape[:2]
    return rule.whole(w, h)[1].tokens


def counter(url: str, name: str, labels: str = "") -> float:
    text = httpx.get(url + "/metrics", timeout=10).text
    m = re.search(rf"^{re.escape(name)}{re.escape(labels)} ([0-9.e+]+)$", text, re.M)
    return float(m.group(1)) if m else 0.0
