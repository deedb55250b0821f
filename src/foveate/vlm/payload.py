"""Request bodies a user posts to a VLM themselves: OpenAI chat completions, Anthropic messages, Gemini
generateContent (each picture base64 inline, introduced by one short line saying where it sits in the page and at
what scale, the question last), or for Qwen2-VL the chat messages plus the processor's ``pixel_values`` and
``image_grid_thw``.  Nothing is sent anywhere."""

from __future__ import annotations

import base64
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.errors import ConfigError
from ..core.io import encode_image
from ..selection import Selection
from .formats import FORMATS, SentPictures, data_url
from .models import resolve
from .picture import Picture
from .pictures import cut_pictures
from .plan import Plan, plan_for
from .rules import VlmRule

MEDIA = {"png": "image/png", "jpeg": "image/jpeg", "jpg": "image/jpeg"}


@dataclass
class Request:
    """A request ready to post: ``body`` (JSON-able), the ``plan`` it follows, the ``pictures`` as sent (RGB
    arrays), the ``lines`` introducing them, and for Qwen2-VL the processor's ``inputs`` (torch tensors)."""

    body: dict[str, Any]
    plan: Plan
    pictures: list[np.ndarray]
    lines: list[str]
    question: str
    api: str
    model: str
    inputs: dict[str, Any] | None = None
    timings_ms: dict[str, float] = field(default_factory=dict)
    encoded: list[str] = field(default_factory=list)  # the pictures, base64 (empty with processor inputs)
    media: str = "image/png"

    def data_urls(self) -> list[str]:
        """The pictures as data URLs, in body order (empty when the request carries processor inputs)."""
        return [data_url(self.media, data) for data in self.encoded]

    def ledger(self) -> dict[str, Any]:
        """The plan's ledger plus the request's model, API, lines and an estimate of their text tokens
        (4 characters a token: each API's own tokenizer decides)."""
        doc = self.plan.to_dict()
        for p, line in zip(doc["pictures"], self.lines):
            p["line"] = line
        text = sum(math.ceil(len(s) / 4) for s in self.lines)
        doc.update(api=self.api, model=self.model, question=self.question, text_tokens_estimate=text)
        doc["timings_ms"] = {**doc["timings_ms"], **{k: round(v, 3) for k, v in self.timings_ms.items()}}
        return doc


def _scale_words(scale: float) -> str:
    return "full resolution" if scale <= 1 + 1e-6 else f"1/{scale:.3g} scale"


def picture_line(pic: Picture, i: int, n: int, image_size: tuple[int, int]) -> str:
    """The short line that introduces a picture: where it sits in the page and at what scale."""
    w, h = image_size
    if pic.kind == "image":
        return f"The page ({w}x{h} px)" + ("." if pic.scale <= 1 + 1e-6 else f", at {_scale_words(pic.scale)}.")
    head = f"Picture {i} of {n}: "
    if pic.kind == "context":
        return head + f"the whole {w}x{h} px page at {_scale_words(pic.scale)}, for context."
    if pic.parts:
        where = "; ".join(
            f"at x {p.at[0]}-{p.at[0] + p.size[0]}, y {p.at[1]}-{p.at[1] + p.size[1]} of this picture: the region "
            f"x {v.box[0]}-{v.box[2]}, y {v.box[1]}-{v.box[3]} of the page, at {_scale_words(v.scale)}"
            for p, v in zip(pic.parts, pic.views())
        )
        return head + f"{len(pic.parts)} regions of the page, separated by grey lines: {where}."
    x0, y0, x1, y1 = pic.box
    return head + f"the region x {x0}-{x1}, y {y0}-{y1} of the page, at {_scale_words(pic.scale)}."


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def build_body(
    api: str, model: str, lines: list[str], pictures: list[Picture], encoded: list[str], media: str, question: str
) -> dict[str, Any]:
    """The JSON body of the request format ``api`` (``openai``, ``anthropic``, ``gemini`` or ``qwen2-vl``:
    :mod:`.formats`) for pictures already encoded as base64 ``encoded`` strings of type ``media``."""
    fmt = FORMATS.get(api)
    if fmt is None:
        raise ValueError(f"unknown request format {api!r}")
    return fmt.body(model, SentPictures(lines, pictures, encoded, media), question)


def build_request(
    image: np.ndarray,
    selection: Selection,
    rule: VlmRule | str | None = None,
    question: str | None = None,
    *,
    model: str | None = None,
    image_format: str = "png",
    plan: Plan | None = None,
    max_pictures: int | None = None,
    inputs: bool = True,
) -> Request:
    """The request body for ``selection`` of ``image`` (H, W, 3) uint8 RGB (a texture's ``.image``) under ``rule``
    (a spec or a :class:`VlmRule`; ``None``: the rule of ``model`` in the model table, :mod:`.models`, else
    ``openai``), for ``model`` (default: the rule's): plan (unless given), cut and resize the pictures, encode them
    (``png`` or ``jpeg``), introduce each with one line, ask ``question`` (default: the selection's query text).  No
    network call.  Qwen2-VL: the processor's inputs too, unless ``inputs=False`` (then the pictures are encoded as for
    the other APIs: :meth:`Request.data_urls`)."""
    t0 = time.perf_counter()
    rule, model = resolve(rule, model)
    if plan is None:
        plan = plan_for(selection, rule, max_pictures=max_pictures)
    t1 = time.perf_counter()
    pics = cut_pictures(image, plan)
    n = len(plan.pictures)
    lines = [picture_line(p, i, n, plan.image_size) for i, p in enumerate(plan.pictures, 1)]
    q = question if question is not None else (selection.query.text or "Describe what you see.")
    t2 = time.perf_counter()
    fmt = image_format.lower()
    if fmt not in MEDIA:
        raise ConfigError(f"image_format must be png or jpeg, got {image_format!r}")
    processor_inputs = rule.inputs(pics) if inputs else None  # a local model's processor (Qwen2-VL), else None
    encoded = [] if processor_inputs is not None else [_b64(encode_image(p, fmt)) for p in pics]
    t3 = time.perf_counter()
    body = rule.body(model, SentPictures(lines, plan.pictures, encoded, MEDIA[fmt]), q)
    t4 = time.perf_counter()
    timings = {
        "plan": plan.timings_ms.get("plan", (t1 - t0) * 1e3) if plan.timings_ms else (t1 - t0) * 1e3,
        "pictures": (t2 - t1) * 1e3,
        "encode": (t3 - t2) * 1e3,
        "body": (t4 - t3) * 1e3,
    }
    return Request(body, plan, pics, lines, q, rule.api, model, processor_inputs, timings, encoded, MEDIA[fmt])
