"""Accuracy per token paid (``foveate eval --vlm RULE`` / ``--model NAME``): for each query, budget and VLM rule (or
model, whose rule the model table picks: :mod:`foveate.vlm.models`), the provider tokens of
foveate's crop plan (:func:`foveate.vlm.plan_for`), of the whole image as the provider takes it, and of a uniform
resize of the whole image with at most the plan's tokens -- and the OCR answer check on each, read from the
pictures exactly as the model sees them (after the provider's own resize, back at source size, like the mosaic).

Plan pictures are read finest first (a composite as its parts, each as the model sees it); a line read in a coarser
picture whose centre lies inside a finer picture is dropped (the model has the finer view there). Only the pictures that
overlap a query's answer boxes (grown as the answer check grows them) are read: a line lies inside its picture, so lines
of the others can never be matched.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from ..vlm import Picture, VlmRule, get_rule, model_rule, plan_for, source_view
from .answers import query_answer_found

#: what the OCR check reads per rule: the plan's pictures, the uniform resize, the whole image
VLM_OCR_ROWS = ("plan", "uniform", "image")


class Line(NamedTuple):
    text: str
    box: tuple[float, float, float, float]


def _grown(q) -> list[tuple[float, float, float, float]]:
    boxes = [b for _, b in q.answers if b is not None] or [tuple(b) for b in q.boxes]
    return [
        (x0 - 0.25 * (y1 - y0), y0 - 0.25 * (y1 - y0), x1 + 0.25 * (y1 - y0), y1 + 0.25 * (y1 - y0))
        for x0, y0, x1, y1 in boxes
    ]


def _overlaps(box, grown) -> bool:
    x0, y0, x1, y1 = box
    return any(x0 < c and a < x1 and y0 < d and b < y1 for a, b, c, d in grown)


def picture_lines(
    rgb: np.ndarray,
    pictures: Sequence[Picture],
    q,
    read: Callable[[np.ndarray], list | None],
    whole_lines: list | None = None,
) -> list[Line] | None:
    """The OCR lines the model's view of ``pictures`` yields near ``q``'s answers, in source coordinates (see the
    module docstring).  ``whole_lines``: the lines of the unchanged image, used for a picture that is the whole
    image seen at its own size.  ``None`` when a read failed."""
    grown = _grown(q)
    placed: list[tuple] = []
    out: list[Line] = []
    for pic in sorted((view for p in pictures for view in p.views()), key=lambda p: p.scale):
        x0, y0, x1, y1 = pic.box
        if _overlaps(pic.box, grown):
            h, w = rgb.shape[:2]
            if whole_lines is not None and pic.box == (0, 0, w, h) and pic.seen == (w, h):
                lines = [Line(ln.text, tuple(ln.box)) for ln in whole_lines]
            else:
                got = read(source_view(rgb, pic))
                if got is None:
                    return None
                lines = [Line(ln.text, (ln.box[0] + x0, ln.box[1] + y0, ln.box[2] + x0, ln.box[3] + y0)) for ln in got]
            for ln in lines:
                cx, cy = (ln.box[0] + ln.box[2]) / 2, (ln.box[1] + ln.box[3]) / 2
                if not any(a <= cx < c and b <= cy < d for a, b, c, d in placed):
                    out.append(ln)
        placed.append(pic.box)
    return out


def vlm_targets(rules: Sequence[str], models: Sequence[str]) -> list[tuple[str, VlmRule]]:
    """``(label, rule)`` per ``--vlm`` rule spec (labelled by the rule's name) and per ``--model`` name (labelled by
    the name; its rule from the model table)."""
    return [(get_rule(r).name, get_rule(r)) for r in rules] + [(m, model_rule(m)) for m in models]


def vlm_record(
    rgb: np.ndarray,
    sel,
    q,
    rule: VlmRule | str,
    read: Callable[[np.ndarray], list | None] | None,
    whole_lines: list | None,
    max_error_rate: float,
) -> dict[str, Any]:
    """One (query, budget, rule): tokens of the plan, the whole image and the uniform resize; with ``read`` (an OCR
    function, or ``None`` for no OCR check), whether each shows the answer."""
    plan = plan_for(sel, rule)
    rec: dict[str, Any] = {
        "plan": plan.tokens,
        "image": plan.image.tokens,
        "uniform": plan.uniform.tokens,
        "pictures": len(plan.pictures),
        "fallback": plan.fallback,
        "kept": plan.kept / max(plan.total, 1),
        "plan_ms": round(plan.timings_ms["plan"], 3),
    }
    if read is not None and q.answers:
        ocr = {}
        for row, pics in (("plan", plan.pictures), ("uniform", [plan.uniform]), ("image", [plan.image])):
            lines = picture_lines(rgb, pics, q, read, whole_lines)
            found = None if lines is None else query_answer_found(q, lines, max_error_rate)
            if found is not None:
                ocr[row] = found
        rec["ocr"] = ocr
    return rec


def aggregate_vlm(records: list[dict]) -> dict:
    """Per budget and rule: ``n``; mean tokens of the plan, the whole image and the uniform resize; ``token_share``
    (sum of plan tokens / sum of whole-image tokens); ``fallback`` and ``kept`` (shares); ``ocr``: per row (plan,
    uniform, image) exact / fuzzy accuracy and n, over the queries with an answer read in all three."""
    acc: dict = defaultdict(list)
    for r in records:
        for rule, v in r.get("vlm", {}).items():
            acc[(r["budget"], rule)].append(v)
    out: dict = {}
    for (budget, rule), rows in sorted(acc.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        g: dict = {"n": len(rows)}
        for k in ("plan", "image", "uniform", "pictures"):
            g[f"{k}_tokens" if k != "pictures" else k] = float(np.mean([x[k] for x in rows]))
        g["token_share"] = float(np.sum([x["plan"] for x in rows]) / max(np.sum([x["image"] for x in rows]), 1))
        g["uniform_share"] = float(np.sum([x["uniform"] for x in rows]) / max(np.sum([x["image"] for x in rows]), 1))
        g["fallback"] = float(np.mean([x["fallback"] for x in rows]))
        g["kept"] = float(np.mean([x["kept"] for x in rows]))
        both = [x["ocr"] for x in rows if set(VLM_OCR_ROWS) <= set(x.get("ocr", {}))]
        if both:
            g["ocr"] = {
                row: {
                    "exact": float(np.mean([o[row]["exact"] for o in both])),
                    "fuzzy": float(np.mean([o[row]["fuzzy"] for o in both])),
                    "n": len(both),
                }
                for row in VLM_OCR_ROWS
            }
        out.setdefault(str(budget), {})[rule] = g
    return out


def vlm_rows(records: list[dict]) -> tuple[list[str], list[list[str]]]:
    """The table of ``aggregate_vlm``: per budget and rule, tokens (plan / whole image / uniform), the plan's share
    of the whole image's tokens, and OCR answer accuracy exact / fuzzy of each."""
    header = [
        "budget",
        "rule or model",
        "plan tokens",
        "image tokens",
        "plan / image %",
        "uniform tokens",
        "pictures",
        "fallback %",
        "OCR plan",
        "OCR uniform",
        "OCR image",
        "plan / image accuracy %",
    ]
    rows = []
    for budget, rules in aggregate_vlm(records).items():
        for rule, g in rules.items():
            o = g.get("ocr")

            def cell(row: str, o: dict | None = o) -> str:
                return f"{100 * o[row]['exact']:.1f} / {100 * o[row]['fuzzy']:.1f}" if o else "-"

            ratio = "-"
            if o and o["image"]["fuzzy"] > 0:
                ratio = (
                    f"{100 * o['plan']['exact'] / max(o['image']['exact'], 1e-9):.1f} / "
                    f"{100 * o['plan']['fuzzy'] / o['image']['fuzzy']:.1f}"
                )
            rows.append(
                [
                    budget,
                    rule,
                    f"{g['plan_tokens']:.0f}",
                    f"{g['image_tokens']:.0f}",
                    f"{100 * g['token_share']:.1f}",
                    f"{g['uniform_tokens']:.0f}",
                    f"{g['pictures']:.2f}",
                    f"{100 * g['fallback']:.1f}",
                    cell("plan"),
                    cell("uniform"),
                    cell("image"),
                    ratio,
                ]
            )
    return header, rows
