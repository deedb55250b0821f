"""One picture of a request, re-planned: select for the turn's question, plan under the model's rule, cut and encode
the plan's pictures, introduce each with its line.  Blocking (runs in the gateway's thread pool)."""

from __future__ import annotations

import base64
import time
from dataclasses import dataclass, field
from typing import Any

from ..core.io import encode_image
from ..core.texture import Texture
from ..query.query import MAX_QUERY_CHARS
from ..selection import select
from ..vlm.payload import picture_line
from ..vlm.pictures import cut_pictures
from ..vlm.plan import plan_for
from ..vlm.rules.base import VlmRule
from ..weights import Weights
from .budget import auto_budget
from .rewrite import Dialect

#: media types sent as JPEG (a photo stays a JPEG); everything else is sent as PNG
JPEG = ("image/jpeg", "image/jpg")


@dataclass
class Planned:
    """What replaces one picture (``parts``; ``None``: the plan would not save, the picture stays), with the tokens
    of the picture as the model would take it (``image_tokens``) and of what is forwarded (``sent_tokens``)."""

    parts: list[dict[str, Any]] | None
    image_tokens: int
    sent_tokens: int
    pictures: int
    budget: int  # the budget selected (``--budget auto``: the one chosen for this picture)
    timings_ms: dict[str, float] = field(default_factory=dict)


def replan(
    tex: Texture, question: str, rule: VlmRule, dialect: Dialect, media: str, budget: int | str, weights: Weights
) -> Planned:
    """``budget``: tokens to select, or ``"auto"`` (:func:`~foveate.gateway.budget.auto_budget` chooses)."""
    t0 = time.perf_counter()
    query = question[-MAX_QUERY_CHARS:]  # the end of a long turn: where the question usually is
    if budget == "auto":
        chosen = auto_budget(tex, query, rule, weights)
        budget, plan = chosen.budget, chosen.plan
        t1 = t2 = time.perf_counter()
    else:
        sel = select(tex, query, int(budget), weights=weights)
        t1 = time.perf_counter()
        plan = plan_for(sel, rule)
        t2 = time.perf_counter()
    budget = int(budget)
    whole = plan.image.tokens
    if plan.fallback or plan.tokens >= whole:
        return Planned(None, whole, whole, 1, budget, {"select": (t1 - t0) * 1e3, "plan": (t2 - t1) * 1e3})
    fmt, out_media = ("jpeg", "image/jpeg") if media.lower() in JPEG else ("png", "image/png")
    pics = cut_pictures(tex.image, plan)
    n = len(plan.pictures)
    parts: list[dict[str, Any]] = []
    for i, (pic, arr) in enumerate(zip(plan.pictures, pics), 1):
        b64 = base64.b64encode(encode_image(arr, fmt)).decode("ascii")
        parts += dialect.parts(picture_line(pic, i, n, plan.image_size), out_media, b64, pic.option)
    t3 = time.perf_counter()
    timings = {"select": (t1 - t0) * 1e3, "plan": (t2 - t1) * 1e3, "pictures": (t3 - t2) * 1e3}
    return Planned(parts, whole, plan.tokens, n, budget, timings)
