"""``--budget auto``: per picture and question, the smallest budget whose plan keeps the likely answer legible.

The rule, in full:

1. **the likely answer lines** are the OCR lines to which the learned text term (the answer ranker) gives a
   probability of at least :data:`LIKELY` (0.25, the threshold under which the selection itself notes "no OCR line
   looks like the answer"); each has a print height (its box height times the weights' ``text_height``);
2. **the candidates** are 64, 144, 273 and 576 tokens, less those above what the whole picture costs under the
   model's rule (a picture costing 300 tokens whole is never given 576);
3. with no likely line (a photo, a question no line answers, the ``fast`` preset without text) the budget is 273
   (the default), or the largest candidate below it;
4. else each candidate, smallest first, is selected and planned under the model's rule, and the first whose pictures
   show every likely line legibly wins: at least :data:`LEGIBLE_SHARE` (90 %) of the line's box lies in pictures the
   model sees at a scale ``s`` (source pixels per pixel, after the provider's own resize) with
   ``print height / s >= LEGIBLE_PX`` (8 px: the legibility rule of the selection's ``auto`` mode and of the
   evaluation's legible coverage);
5. when no candidate does, the largest one.

A document (:func:`auto_document_budget`) follows the same rule with one budget across its pages: the candidates are
bounded by every page sent whole, the likely lines are those of the page the question is most likely about (the
document's page score), and a candidate wins when the plan of that page shows them legibly.

Blocking (runs in the gateway's thread pool); a few milliseconds per candidate tried.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from ..core.config import DEFAULT_BUDGET, LEGIBLE_PX
from ..core.texture import Texture
from ..query.query import Query
from ..query.scorer import resolve_scorer
from ..query.terms import query_maps
from ..query.text.term import UNSURE_ANSWER
from ..selection import Selection, select
from ..vlm.plan import Plan, plan_for
from ..vlm.rules.base import VlmRule
from ..weights import Weights

if TYPE_CHECKING:
    from ..document.prompt import DocumentPlan
    from ..document.select import DocumentSelection
    from ..document.texture import DocumentTexture

S = TypeVar("S")  # a selection: one picture's or a document's
P = TypeVar("P")  # its plan

#: the budgets ``auto`` chooses from, smallest first
BUDGETS = (64, 144, 273, 576)
#: a line is a likely answer line at this probability or above
LIKELY = UNSURE_ANSWER
#: share of a line's box that must be shown legibly
LEGIBLE_SHARE = 0.9


@dataclass
class AutoBudget:
    """The chosen budget, its selection and plan, and why (one line, for the log)."""

    budget: int
    selection: Selection
    plan: Plan
    why: str


def likely_lines(tex: Texture, question: str, weights: Weights) -> tuple[np.ndarray, np.ndarray]:
    """(boxes (N, 4), print heights (N,)) of the lines with probability >= :data:`LIKELY`; empty without any."""
    scorer = resolve_scorer(weights, None, tex.channels, tex.device)
    lines = query_maps(tex, Query(text=question), scorer.weights, terms=["text"]).lines
    if lines is None or not len(lines.probs):
        return np.zeros((0, 4)), np.zeros(0)
    keep = np.nonzero(lines.probs >= LIKELY)[0]
    return lines.boxes[keep], lines.heights[keep]


def legible_shares(plan: Plan, boxes: np.ndarray, heights: np.ndarray) -> np.ndarray:
    """(N,) the share of each box shown by the plan's pictures with its print ``heights`` at >= ``LEGIBLE_PX``."""
    views = [v for p in plan.pictures for v in p.views()]
    out = np.zeros(len(boxes))
    for i, (box, h) in enumerate(zip(boxes, heights)):
        x0, y0 = int(np.floor(box[0])), int(np.floor(box[1]))
        x1, y1 = max(int(np.ceil(box[2])), x0 + 1), max(int(np.ceil(box[3])), y0 + 1)
        shown = np.zeros((y1 - y0, x1 - x0), bool)
        for v in views:
            if h / v.scale < LEGIBLE_PX:
                continue
            vx0, vy0, vx1, vy1 = v.box
            shown[max(vy0 - y0, 0) : max(vy1 - y0, 0), max(vx0 - x0, 0) : max(vx1 - x0, 0)] = True
        out[i] = shown.mean()
    return out


def _smallest_legible(
    candidates: list[int],
    plan: Callable[[int], tuple[S, P]],
    boxes: np.ndarray,
    heights: np.ndarray,
    seen: Callable[[P], Plan | None],
    where: str = "",
) -> tuple[int, S, P, str]:
    """Steps 3-5 of the rule: (budget, selection, plan, why) among ``candidates``; ``seen`` picks, from what ``plan``
    makes, the picture plan the likely lines must be legible in (``None``: not shown at all)."""
    if not len(boxes):
        budget = max([b for b in candidates if b <= DEFAULT_BUDGET] or candidates[:1])
        return (budget, *plan(budget), f"no likely answer line{where}")
    for budget in candidates:
        sel, p = plan(budget)
        shown = seen(p)
        if shown is not None and (legible_shares(shown, boxes, heights) >= LEGIBLE_SHARE).all():
            return budget, sel, p, f"{len(boxes)} likely line(s){where} legible"
    return budget, sel, p, f"{len(boxes)} likely line(s){where} not all legible at any budget: the largest"


def _candidates(whole: int) -> list[int]:
    """Step 2: the budgets no larger than the whole picture (or document) costs."""
    return [b for b in BUDGETS if b <= whole] or [max(1, whole)]


def auto_budget(tex: Texture, question: str, rule: VlmRule, weights: Weights) -> AutoBudget:
    """The budget of the rule above for ``question`` on ``tex`` under ``rule``, with its selection and plan."""
    h, w = tex.image_size

    def plan(budget: int) -> tuple[Selection, Plan]:
        sel = select(tex, question, budget, weights=weights)
        return sel, plan_for(sel, rule)

    boxes, heights = likely_lines(tex, question, weights)
    return AutoBudget(*_smallest_legible(_candidates(rule.whole(w, h)[1].tokens), plan, boxes, heights, lambda p: p))


@dataclass
class AutoDocumentBudget:
    """The budget chosen for a document, its selection and plan across the pages, and why."""

    budget: int
    selection: DocumentSelection
    plan: DocumentPlan
    why: str


def auto_document_budget(doc: DocumentTexture, question: str, rule: VlmRule, weights: Weights) -> AutoDocumentBudget:
    """The module's rule on a document: one budget across its pages (see the module docstring)."""
    from ..document.prompt import plan_document
    from ..document.select import select_document

    candidates = _candidates(sum(int(rule.whole(p.image_size[1], p.image_size[0])[1].tokens) for p in doc.pages))
    made: dict[int, tuple[DocumentSelection, DocumentPlan]] = {}

    def plan(budget: int) -> tuple[DocumentSelection, DocumentPlan]:
        if budget not in made:  # the first candidate's selection also names the page
            sel = select_document(doc, question, budget, weights=weights)
            made[budget] = sel, plan_document(sel, rule)
        return made[budget]

    page = int(np.argmax(plan(candidates[0])[0].relevance))
    boxes, heights = likely_lines(doc.pages[page], question, weights)
    return AutoDocumentBudget(
        *_smallest_legible(candidates, plan, boxes, heights, lambda p: dict(p.plans).get(page), f" on page {page + 1}")
    )
