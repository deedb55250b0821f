"""Request bodies: OpenAI chat completions, Anthropic messages, Gemini generateContent -- pictures base64 inline, as
planned, each introduced by one line; the ledger; ``foveate prompt``."""

from __future__ import annotations

import base64
import json

import cv2
import numpy as np
import pytest

import foveate
from foveate.core.errors import ConfigError
from foveate.vlm import build_request, get_rule, plan_for

from ..cli.common import run


def decode(data: str) -> np.ndarray:
    return cv2.cvtColor(
        cv2.imdecode(np.frombuffer(base64.b64decode(data), np.uint8), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB
    )


@pytest.fixture(scope="module")
def page_sel(page_texture):
    return foveate.select(page_texture, "What is the total due?", budget=273)


def test_openai_body(page_texture, page_sel):
    req = build_request(page_texture.image, page_sel, "openai")
    body = req.body
    assert body["model"] == "gpt-4o"
    content = body["messages"][0]["content"]
    assert content[-1] == {"type": "text", "text": "What is the total due?"}
    texts, images = content[0:-1:2], content[1:-1:2]
    assert [t["text"] for t in texts] == req.lines and len(images) == len(req.plan.pictures)
    for img, pic, arr in zip(images, req.plan.pictures, req.pictures):
        head, data = img["image_url"]["url"].split(",", 1)
        assert head == "data:image/png;base64" and img["image_url"]["detail"] == pic.option
        got = decode(data)
        assert got.shape == (pic.sent[1], pic.sent[0], 3) and np.array_equal(got, arr)  # PNG: lossless
    for i, (pic, line) in enumerate(zip(req.plan.pictures, req.lines), 1):
        assert f"Picture {i} of {len(req.lines)}" in line
        if pic.kind == "context":
            assert "for context" in line
        for part in pic.parts or [pic]:  # a composite's line says where each region sits in it and in the page
            x0, y0, x1, y1 = part.box
            assert f"x {x0}-{x1}, y {y0}-{y1}" in line or pic.kind == "context"
        for part in pic.parts:
            (ax, ay), (pw, ph) = part.at, part.size
            assert f"at x {ax}-{ax + pw}, y {ay}-{ay + ph} of this picture" in line
    json.dumps(body)


def test_anthropic_and_gemini_bodies(page_texture, page_sel):
    req = build_request(page_texture.image, page_sel, "anthropic", "Total?", model="claude-x", image_format="jpeg")
    content = req.body["messages"][0]["content"]
    assert req.body["model"] == "claude-x" and req.body["max_tokens"] > 0
    blocks = [c for c in content if c["type"] == "image"]
    assert len(blocks) == len(req.plan.pictures)
    for b, pic in zip(blocks, req.plan.pictures):
        assert b["source"]["type"] == "base64" and b["source"]["media_type"] == "image/jpeg"
        assert decode(b["source"]["data"]).shape[:2] == (pic.sent[1], pic.sent[0])
    assert content[-1]["text"] == "Total?"
    g = build_request(page_texture.image, page_sel, "gemini").body
    parts = g["contents"][0]["parts"]
    assert parts[-1] == {"text": "What is the total due?"}
    assert all("inline_data" in p for p in parts[1:-1:2])
    with pytest.raises(ConfigError, match="png or jpeg"):
        build_request(page_texture.image, page_sel, "anthropic", image_format="gif")


def test_fallback_request_sends_the_image(page_texture, page_sel):
    req = build_request(page_texture.image, page_sel, "llava-1.5")
    assert req.plan.fallback and req.lines == ["The page (850x1100 px), at 1/3.28 scale."]
    assert np.array_equal(req.pictures[0], page_texture.image)
    ledger = req.ledger()
    assert ledger["plan_tokens"] == ledger["image_tokens"] == 576 and ledger["notes"]


def test_ledger(page_texture, page_sel):
    req = build_request(page_texture.image, page_sel, "openai-patch")
    d = req.ledger()
    for key in ("rule", "image_size", "image_tokens", "plan_tokens", "uniform_tokens", "pictures", "timings_ms"):
        assert key in d
    assert d["image_size"] == [850, 1100] and d["plan_tokens"] < d["image_tokens"]
    assert d["uniform_tokens"] <= d["plan_tokens"]
    for p in d["pictures"]:
        assert {"box", "sent", "tokens", "line"} <= set(p)
    assert d["plan_tokens"] == sum(p["tokens"] for p in d["pictures"])
    assert d["image_tokens"] == get_rule("openai-patch").tokens(850, 1100)
    assert {"plan", "pictures", "encode", "body"} <= set(d["timings_ms"])


def test_prompt_command(tmp_path):
    r = run(
        "prompt",
        "example:photo",
        "-q",
        "What is on the table?",
        "--vlm",
        "anthropic",
        "--json",
        "-o",
        tmp_path / "p",
        "--preset",
        "fast",
    )
    assert r.returncode == 0, r.stderr
    ledger = json.loads(r.stdout)
    assert ledger["rule"] == "anthropic" and ledger["image_size"] == [512, 512]
    assert ledger["plan_tokens"] <= ledger["image_tokens"] == 361  # ceil(512 / 28) ** 2 visual tokens
    body = json.loads((tmp_path / "p" / "request.json").read_text())
    assert len([c for c in body["messages"][0]["content"] if c["type"] == "image"]) == len(ledger["pictures"])
    assert len(list((tmp_path / "p" / "pictures").iterdir())) == len(ledger["pictures"])
    r = run("prompt", "example:page", "-q", "total due", "--vlm", "nope", "-o", tmp_path / "q")
    assert r.returncode == 1 and "unknown VLM rule" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = run("prompt", "example:page", "-q", "total", "--format", "gif", "-o", tmp_path / "q")
    assert r.returncode == 1 and "--format" in r.stderr


def test_plan_for_is_pure_and_json_able(page_sel):
    a = plan_for(page_sel, "openai").to_dict()
    b = plan_for(page_sel, "openai").to_dict()
    a.pop("timings_ms"), b.pop("timings_ms")
    assert a == b and json.loads(json.dumps(a)) == a


def test_gemini3_body_sets_each_pictures_media_resolution(page_texture, page_sel):
    """ai.google.dev/gemini-api/docs/media-resolution (read 2026-11-27): a part's ``media_resolution`` (``{"level":
    "MEDIA_RESOLUTION_LOW"}``, beside ``inline_data``) takes precedence over the request's; Gemini 2.x parts carry
    none."""
    req = build_request(page_texture.image, page_sel, model="gemini-3-flash-preview")
    parts = req.body["contents"][0]["parts"]
    pictures = [p for p in parts if "inline_data" in p]
    assert len(pictures) == len(req.plan.pictures) and req.ledger()["model"] == "gemini-3-flash-preview"
    for part, pic in zip(pictures, req.plan.pictures):
        assert pic.option in ("low", "medium", "high", "ultra_high")
        assert part["media_resolution"] == {"level": f"MEDIA_RESOLUTION_{pic.option.upper()}"}
        assert decode(part["inline_data"]["data"]).shape[:2] == (pic.sent[1], pic.sent[0])
    assert req.plan.tokens == sum(
        {"low": 280, "medium": 560, "high": 1120, "ultra_high": 2240}[p.option] for p in req.plan.pictures
    )
    old = build_request(page_texture.image, page_sel, model="gemini-2.5-flash").body["contents"][0]["parts"]
    assert all("media_resolution" not in p for p in old)
