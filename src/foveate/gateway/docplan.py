"""One PDF of a request, re-planned: one budget across its pages for the turn's question
(:func:`~foveate.document.select_document`), a crop plan per page it touches under the model's rule
(:func:`~foveate.document.prompt.plan_document`), and the plan's pictures, each after its line (``Page 2 of 3.
Picture 1 of 2: the region ...``), in place of the PDF.  Blocking (runs in the gateway's thread pool).

The reference a plan must stay under is what the provider bills for the PDF.  Anthropic and OpenAI both put every page
into the model's context as a picture *and* its extracted text; neither prices the text part exactly beforehand (it
is ordinary input tokens of whatever text the provider extracts).  The reference counted here is the pictures part
alone -- every page as a picture under the model's rule at the render's size (the rule's own resize applies), the
text part counted as nothing -- so a plan under it is under the bill whatever the text costs.  The PDF's text is not
forwarded beside the pictures (docs/gateway.md says why).
"""

from __future__ import annotations

import base64
import time

from ..core.io import encode_image
from ..document.prompt import document_pictures, plan_document
from ..document.select import select_document
from ..document.texture import DocumentTexture
from ..query.query import MAX_QUERY_CHARS
from ..vlm.rules.base import VlmRule
from ..weights import Weights
from .budget import auto_document_budget
from .replan import Planned
from .rewrite import Dialect


def replan_document(
    doc: DocumentTexture, question: str, rule: VlmRule, dialect: Dialect, budget: int | str, weights: Weights
) -> Planned:
    """``budget``: tokens to select across the pages, or ``"auto"``
    (:func:`~foveate.gateway.budget.auto_document_budget` chooses)."""
    t0 = time.perf_counter()
    question = question[-MAX_QUERY_CHARS:]
    if budget == "auto":
        chosen = auto_document_budget(doc, question, rule, weights)
        spend, sel, plan = chosen.budget, chosen.selection, chosen.plan
        t1 = t2 = time.perf_counter()  # select and plan together: their sum is in "select"
    else:
        spend = int(budget)
        sel = select_document(doc, question, spend, weights=weights)
        t1 = time.perf_counter()
        plan = plan_document(sel, rule)
        t2 = time.perf_counter()
    whole = plan.document_tokens
    n = sum(len(p.pictures) for _, p in plan.plans)
    over = rule.max_pictures is not None and n > rule.max_pictures
    if not plan.plans or plan.tokens >= whole or over:
        return Planned(None, whole, whole, 1, spend, {"select": (t1 - t0) * 1e3, "plan": (t2 - t1) * 1e3})
    parts = []
    for _, pic, arr, line in document_pictures(doc, plan):
        b64 = base64.b64encode(encode_image(arr, "png")).decode("ascii")
        parts += dialect.parts(line, "image/png", b64, pic.option)
    t3 = time.perf_counter()
    timings = {"select": (t1 - t0) * 1e3, "plan": (t2 - t1) * 1e3, "pictures": (t3 - t2) * 1e3}
    return Planned(parts, whole, plan.tokens, n, spend, timings)
