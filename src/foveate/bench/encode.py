"""Benchmarks: encode time per channel group, select time (scoring + cascade; with the token cut), memory.

    foveate bench                      # bundled photo and page at 1024x1024, presets fast/default/full
    foveate bench -i big.jpg --json bench.json

Medians and interquartile ranges of ``repeats`` runs after one warm-up; the JSON carries the machine,
library versions and the git commit so figures can be compared across runs.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import torch
from rich.console import Console
from rich.table import Table

from ..core.config import EncodeConfig
from ..core.device import describe, resolve_device
from ..core.io import load_image
from ..core.texture import encode_array
from ..query.text import _embed_query_cached, clear_ocr_cache, embed_query
from ..selection import select
from .common import EXAMPLES, machine_info

#: Distinct questions for the per-query benchmark (each is embedded once: the first call pays MiniLM).
TEXT_QUERIES = [
    "What is the total due?",
    "When was it signed?",
    "Who is the invoice billed to?",
    "What is the invoice number?",
    "When is the payment due?",
    "How many mirror mounts were ordered?",
    "What is the unit price of the lens?",
    "Which bank account should I pay into?",
    "What is the late payment interest rate?",
    "Who signed the invoice?",
    "What is the billing e-mail address?",
    "What is the tax rate?",
    "What is the company's street address?",
    "How much does the calibration service cost?",
    "What is the subtotal?",
    "Attn: who should read this?",
]


def timed(fn: Callable[[], object], repeats: int) -> dict[str, float]:
    """Median, p25, p75 and min of ``repeats`` calls (ms), after one warm-up call."""
    fn()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1000.0)
    return _stats(ts)


def default_images() -> list[tuple[str, np.ndarray]]:
    """The bundled photo and page, each resized to 1024x1024 (area-averaged or bilinear)."""
    out = []
    for name in ("photo.jpg", "page.png"):
        img = load_image(EXAMPLES / name)
        interp = cv2.INTER_AREA if min(img.shape[:2]) >= 1024 else cv2.INTER_CUBIC
        out.append((f"{Path(name).stem} 1024x1024", cv2.resize(img, (1024, 1024), interpolation=interp)))
    return out


def bench_image(
    name: str, img: np.ndarray, presets: list[str], repeats: int, device: torch.device, weights: object = None
) -> dict:
    """All measurements for one image (selects with ``weights``: the shipped ones by default)."""
    rec: dict = {"image": name, "size": [int(img.shape[1]), int(img.shape[0])], "presets": {}}
    for preset in presets:
        cfg = EncodeConfig(preset=preset)
        groups: dict[str, list[float]] = {}
        totals = []
        clear_ocr_cache()
        encode_array(img, cfg, device)  # warm-up (also loads the OCR and MiniLM models once)
        for _ in range(max(3, repeats // 4)):
            clear_ocr_cache()  # time the OCR itself, not the per-image cache
            t0 = time.perf_counter()
            tex = encode_array(img, cfg, device)
            totals.append((time.perf_counter() - t0) * 1000.0)
            for g, ms in tex.timings_ms.items():
                groups.setdefault(g, []).append(ms)
            for part, ms in tex.extras.get("text", {}).get("timings_ms", {}).items():
                groups.setdefault(f"text: {part}", []).append(ms)
        p: dict = {
            "encode_ms": statistics.median(totals),
            "groups_ms": {g: statistics.median(v) for g, v in groups.items() if g not in ("total", "decode")},
            "absent": list(tex.absent),
            "channels": len(tex.channels),
            "levels": tex.num_levels,
            "feature_bytes": tex.feature_bytes(),
            "bytes": tex.nbytes(),
            "select_ms": {},
        }
        center = {"points": [(img.shape[1] * 0.3, img.shape[0] * 0.4)]}
        for mode in ("quadtree", "topk"):
            p["select_ms"][mode] = {
                # each timed call runs at once, in this iteration
                "score+select": timed(lambda: select(tex, center, mode=mode, cut=False, weights=weights), repeats),  # noqa: B023
                "score+select+cut": timed(lambda: select(tex, center, mode=mode, cut=True, weights=weights), repeats),  # noqa: B023
            }
        if "text" in tex.groups:
            p["text_lines"] = len(tex.extras["text"]["lines"])
            p["text_query_ms"] = bench_text_queries(tex, repeats, weights)
        rec["presets"][preset] = p
    return rec


def bench_text_queries(tex, repeats: int, weights: object = None) -> dict:
    """Per-query time after encode for text questions: ``select`` with the token cut, the query embedding
    included (``cold``: each question seen for the first time) or cached (``warm``), and the embedding alone."""
    cold, embed = [], []
    for q in TEXT_QUERIES:
        _embed_query_cached.cache_clear()
        t0 = time.perf_counter()
        embed_query(q)
        embed.append((time.perf_counter() - t0) * 1000.0)
        _embed_query_cached.cache_clear()
        t0 = time.perf_counter()
        select(tex, q, weights=weights)
        cold.append((time.perf_counter() - t0) * 1000.0)
    for q in TEXT_QUERIES:
        embed_query(q)
    qs = iter(TEXT_QUERIES * (2 + repeats // len(TEXT_QUERIES)))
    warm = timed(lambda: select(tex, next(qs), weights=weights), repeats)
    return {"cold": _stats(cold), "embed": _stats(embed), "warm": warm}


def _stats(ts: list[float]) -> dict[str, float]:
    q = statistics.quantiles(ts, n=4) if len(ts) > 1 else [ts[0]] * 3
    return {"median": statistics.median(ts), "p25": q[0], "p75": q[2], "min": min(ts), "n": len(ts)}


def run_bench(
    images: list[Path],
    repeats: int = 20,
    presets: list[str] | None = None,
    json_path: Path | None = None,
    device: str | None = "auto",
    console: Console | None = None,
    weights: str = "default",
) -> dict:
    console = console or Console()
    dev = resolve_device(device)
    presets = presets or ["fast", "default", "full"]
    inputs = [(p.name, load_image(p)) for p in images] if images else default_images()
    from ..weights import load_weights

    w = load_weights(weights)
    result: dict[str, Any] = {"machine": machine_info(dev), "repeats": repeats, "weights": weights, "images": []}
    console.print(
        f"device {describe(dev)}, {os.cpu_count()} CPUs, torch {torch.__version__} "
        f"({torch.get_num_threads()} threads), {repeats} repeats, weights {weights}, medians",
        highlight=False,
    )
    for name, img in inputs:
        with console.status(f"benchmarking {name} ..."):
            rec = bench_image(name, img, presets, repeats, dev, w)
        result["images"].append(rec)
        _print_image(console, rec)
    if json_path is not None:
        Path(json_path).write_text(json.dumps(result, indent=1))
        console.print(f"wrote {json_path}")
    return result


def _print_image(console: Console, rec: dict) -> None:
    presets = list(rec["presets"])
    t = Table(title=f"{rec['image']}: encode ms per channel group (median)", box=None)
    t.add_column("group")
    for p in presets:
        t.add_column(p, justify="right")
    groups = []
    for p in presets:
        groups += [g for g in rec["presets"][p]["groups_ms"] if g not in groups]
    for g in groups:
        t.add_row(
            g,
            *[
                f"{rec['presets'][p]['groups_ms'][g]:.1f}" if g in rec["presets"][p]["groups_ms"] else "-"
                for p in presets
            ],
        )
    t.add_row("[bold]encode total[/]", *[f"[bold]{rec['presets'][p]['encode_ms']:.1f}[/]" for p in presets])
    t.add_row(
        "channels / levels", *[f"{rec['presets'][p]['channels']} / {rec['presets'][p]['levels']}" for p in presets]
    )
    t.add_row("feature texture KiB", *[f"{rec['presets'][p]['feature_bytes'] / 1024:.0f}" for p in presets])
    console.print(t)
    s = Table(title=f"{rec['image']}: select ms (median \\[p25-p75])", box=None)
    s.add_column("preset")
    s.add_column("mode")
    s.add_column("score + select", justify="right")
    s.add_column("+ token cut", justify="right")
    for p in presets:
        for mode, m in rec["presets"][p]["select_ms"].items():
            a, b = m["score+select"], m["score+select+cut"]
            s.add_row(
                p,
                mode,
                f"{a['median']:.2f} \\[{a['p25']:.2f}-{a['p75']:.2f}]",
                f"{b['median']:.2f} \\[{b['p25']:.2f}-{b['p75']:.2f}]",
            )
    console.print(s)
    tq = [(p, rec["presets"][p]) for p in presets if "text_query_ms" in rec["presets"][p]]
    if tq:
        t = Table(
            title=f"{rec['image']}: text query ms after encode (median \\[p25-p75]; "
            f"{len(TEXT_QUERIES)} distinct questions)",
            box=None,
        )
        for col in (
            "preset",
            "OCR lines",
            "select, new question (incl. embedding)",
            "query embedding alone",
            "select, cached embedding",
        ):
            t.add_column(col, justify="right" if col != "preset" else "left")
        for p, r in tq:
            m = r["text_query_ms"]
            t.add_row(
                p,
                str(r["text_lines"]),
                *[f"{m[k]['median']:.2f} \\[{m[k]['p25']:.2f}-{m[k]['p75']:.2f}]" for k in ("cold", "embed", "warm")],
            )
        console.print(t)
