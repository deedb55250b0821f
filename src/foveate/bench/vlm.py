"""``foveate bench-prompt``: the time to plan a selection's pictures under a VLM rule and build the request body
(``foveate.vlm.build_request``), and, separately, to encode the pictures (PNG, JPEG; Qwen2-VL: the processor's
inputs).  Default images: the bundled photo and page resized to 1024 x 1024."""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from ..core.device import resolve_device
from ..vlm.rules.registry import rule_examples
from .common import EXAMPLES, machine_info, write_json

#: the question asked of each bundled example
QUESTIONS = {"page": "What is the total due?", "photo": "What is on the table?"}
#: one spec per registered rule
RULES = tuple(rule_examples())


def model_spec(spec: str) -> bool:
    """Whether ``spec`` names a model of the model table rather than a rule (``gpt-5.2`` against ``openai``)."""
    from ..vlm import list_rules

    return spec.split(":")[0].strip().lower() not in list_rules()


def _median(xs: list[float]) -> float:
    return float(statistics.median(xs))


def bench_prompt(
    images: list[Path] | None = None,
    rules: tuple[str, ...] = RULES,
    budgets: tuple[int, ...] = (273,),
    repeats: int = 20,
    size: int = 1024,
    console: Any = None,
    json_path: Path | None = None,
) -> dict:
    """Median over ``repeats`` (after a warm-up) of: plan, pictures (cut + resize), body -- their sum is "plan and
    payload" -- and of the pictures' PNG and JPEG encoding, per image, budget and rule."""
    import foveate

    from ..core.io import encode_image, load_image
    from ..vlm import build_request, resolve

    paths = images or [EXAMPLES / "photo.jpg", EXAMPLES / "page.png"]
    rows = []
    for path in paths:
        rgb = load_image(path)
        if not images:  # the bundled examples, as in `foveate bench`
            rgb = cv2.resize(rgb, (size, size), interpolation=cv2.INTER_AREA)
        tex = foveate.encode(rgb, preset="default", device="cpu")
        question = QUESTIONS.get(Path(path).stem, "What does it say?")
        for budget in budgets:
            sel = foveate.select(tex, question, budget=budget)
            for spec in rules:
                rule, _ = resolve(None, spec) if model_spec(spec) else resolve(spec, None)
                build_request(tex.image, sel, rule, question)  # warm-up (imports, caches)
                t: dict[str, list[float]] = {"plan": [], "pictures": [], "body": [], "total": [], "png": [], "jpeg": []}
                for _ in range(repeats):
                    req = build_request(tex.image, sel, rule, question, inputs=False)
                    for k in ("plan", "pictures", "body"):
                        t[k].append(req.timings_ms[k])
                    t["total"].append(req.timings_ms["plan"] + req.timings_ms["pictures"] + req.timings_ms["body"])
                    t["png"].append(req.timings_ms["encode"])
                    t0 = time.perf_counter()
                    for p in req.pictures:
                        encode_image(p, "jpeg")
                    t["jpeg"].append((time.perf_counter() - t0) * 1e3)
                row = {
                    "image": Path(path).name,
                    "size": list(tex.image.shape[1::-1]),
                    "budget": budget,
                    "rule": rule.name if rule.name == spec else f"{spec} ({rule.name})",
                    "pictures": len(req.plan.pictures),
                    "plan_tokens": req.plan.tokens,
                    "image_tokens": req.plan.image.tokens,
                    **{f"{k}_ms": _median(v) for k, v in t.items()},
                    "total_ms_max": float(np.max(t["total"])),
                }
                if rule.api == "qwen2-vl":
                    t0 = time.perf_counter()
                    for _ in range(max(1, repeats // 4)):
                        rule.inputs(req.pictures)
                    row["processor_ms"] = (time.perf_counter() - t0) * 1e3 / max(1, repeats // 4)
                rows.append(row)
    result = {"machine": machine_info(resolve_device("cpu")), "repeats": repeats, "rows": rows}
    if console is not None:
        from rich.table import Table

        table = Table(
            "image",
            "budget",
            "rule",
            "pictures",
            "tokens (plan / image)",
            "plan ms",
            "pictures ms",
            "body ms",
            "plan + payload ms",
            "PNG ms",
            "JPEG ms",
            box=None,
        )
        for r in rows:
            extra = f" (processor {r['processor_ms']:.1f})" if "processor_ms" in r else ""
            table.add_row(
                r["image"],
                str(r["budget"]),
                r["rule"],
                str(r["pictures"]),
                f"{r['plan_tokens']} / {r['image_tokens']}",
                f"{r['plan_ms']:.2f}",
                f"{r['pictures_ms']:.2f}",
                f"{r['body_ms']:.3f}",
                f"{r['total_ms']:.2f}",
                f"{r['png_ms']:.2f}",
                f"{r['jpeg_ms']:.2f}{extra}",
            )
        console.print(table)
    write_json(result, json_path)
    return result
