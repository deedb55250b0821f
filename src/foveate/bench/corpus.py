"""Encode a folder of distinct images, once per OCR mode (``foveate bench --folder DIR --ocr auto,always``): the
per-image encode time of gated (``auto``) and full-page (``always``) OCR in the same run, and how many of the
full-page OCR's lines the gated encode found.

Every image is encoded once per mode, the modes interleaved image by image (machine load hits them alike), the
per-pixels OCR cache cleared before each encode: no figure is a repeat served from a cache.  The first image is a
warm-up (models load) and is not timed.

Line recall: a full-page line is *found* when a gated line's box overlaps it (IoU >= 0.5), and *read the same*
when that line also has the same text.  With ``queries.jsonl`` beside the images (``foveate eval``'s format), the
*answer lines* -- full-page lines that overlap a query's ground-truth box by half their area -- are counted apart:
those are the lines a question about the image needs.  The lines the gated encode missed are listed (text, box,
confidence), the first :data:`MISSED_SHOWN` printed and all in the JSON.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from ..channels.text.ocr import clear_ocr_cache
from ..core.config import EncodeConfig
from ..core.device import resolve_device
from ..core.io import load_image
from ..core.texture import encode_array
from ..store.ingest import expand_images
from .common import machine_info, write_json

#: missed lines printed under the recall line (the JSON has them all)
MISSED_SHOWN = 10


def _iou(a, b) -> float:
    ix = max(0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def _overlap(line, box) -> float:
    """Share of the line's box inside ``box``."""
    ix = max(0, min(line[2], box[2]) - max(line[0], box[0]))
    iy = max(0, min(line[3], box[3]) - max(line[1], box[1]))
    area = (line[2] - line[0]) * (line[3] - line[1])
    return ix * iy / area if area > 0 else 0.0


def match_lines(reference: list[dict], lines: list[dict]) -> list[tuple[bool, bool]]:
    """Per reference line: (found -- a line with box IoU >= 0.5, read the same -- and the same text)."""
    out = []
    for ref in reference:
        near = [ln for ln in lines if _iou(ln["box"], ref["box"]) >= 0.5]
        out.append((bool(near), any(ln["text"] == ref["text"] for ln in near)))
    return out


def _answer_boxes(root: Path) -> dict[str, list[list[float]]]:
    """image path (resolved) -> ground-truth boxes of every query about it, from ``queries.jsonl`` if there is one."""
    q = root / "queries.jsonl"
    boxes: dict[str, list] = {}
    if not q.is_file():
        return boxes
    for line in q.read_text().splitlines():
        try:
            d = json.loads(line)
            boxes.setdefault(str((root / d["image"]).resolve()), []).extend(d.get("boxes") or [])
        except (ValueError, KeyError, TypeError):
            continue
    return boxes


def line_recall(
    images: list[tuple[str, list[dict], list[dict]]], answers: dict[str, list[list[float]]]
) -> dict[str, Any]:
    """How many of the full-page lines the gated encode found, over ``(image, full-page lines, gated lines)``;
    ``answers`` maps a resolved image path to its queries' boxes (:func:`_answer_boxes`).  ``missed`` lists every
    full-page line not found -- image, text, box, confidence, whether it is an answer line -- so a recall below
    target says what was lost (a fragment read into a texture, or real print)."""
    total = found = same = a_total = a_found = a_same = 0
    missed = []
    for image, ref, got in images:
        boxes = answers.get(str(Path(image).resolve()), [])
        for ln, (f, s) in zip(ref, match_lines(ref, got)):
            is_answer = any(_overlap(ln["box"], b) >= 0.5 for b in boxes)
            total, found, same = total + 1, found + f, same + s
            if is_answer:
                a_total, a_found, a_same = a_total + 1, a_found + f, a_same + s
            if not f:
                missed.append(
                    {
                        "image": str(image),
                        "text": ln["text"],
                        "box": list(ln["box"]),
                        "score": ln.get("score"),
                        "answer": is_answer,
                    }
                )
    return {
        "lines": total,
        "found": found,
        "read_same": same,
        "answer_lines": a_total,
        "answer_found": a_found,
        "answer_read_same": a_same,
        "missed": missed,
    }


def _stats(ts: list[float]) -> dict[str, float]:
    if not ts:
        return {"median": float("nan"), "p25": float("nan"), "p75": float("nan"), "n": 0}
    q = statistics.quantiles(ts, n=4) if len(ts) > 1 else [ts[0]] * 3
    return {"median": statistics.median(ts), "p25": q[0], "p75": q[2], "n": len(ts)}


def bench_corpus(
    folder: str | Path,
    *,
    modes: tuple[str, ...] = ("auto", "always"),
    preset: str = "default",
    limit: int | None = None,
    recogniser: str = "float",
    label: str | None = None,
    console: Console | None = None,
    json_path: Path | None = None,
) -> dict[str, Any]:
    """Encode every image of ``folder`` (recursively; the first ``limit`` + 1 in name order) once per OCR mode, its
    lines read by ``recogniser``."""
    console = console or Console()
    root = Path(folder)
    images_dir = root / "images" if (root / "images").is_dir() else root
    paths = expand_images([images_dir])
    if limit is not None:
        paths = paths[: limit + 1]
    answers = _answer_boxes(root)
    configs = {m: EncodeConfig(preset=preset, options=(("ocr", m), ("recogniser", recogniser))) for m in modes}
    cpu = resolve_device("cpu")
    per_image: list[dict] = []
    with console.status(f"encoding {len(paths)} images x {len(modes)} OCR modes ...") as status:
        for i, path in enumerate(paths):
            rgb = load_image(path)
            rec: dict[str, Any] = {"image": str(path), "size": [int(rgb.shape[1]), int(rgb.shape[0])], "modes": {}}
            for m in modes:
                clear_ocr_cache()
                t0 = time.perf_counter()
                tex = encode_array(rgb, configs[m], cpu)
                ms = (time.perf_counter() - t0) * 1000.0
                text = tex.extras.get("text", {})
                rec["modes"][m] = {
                    "encode_ms": ms,
                    "text_ms": tex.timings_ms.get("text", 0.0),
                    "lines": text.get("lines", []),
                    "gate": text.get("ocr", {}).get("gate"),
                }
            if i > 0:  # the first image pays the models' load
                per_image.append(rec)
            status.update(f"encoded {i + 1}/{len(paths)} images x {len(modes)} OCR modes ...")
    result: dict[str, Any] = {
        "machine": machine_info(cpu),
        "folder": str(root),
        "label": label,
        "preset": preset,
        "modes": list(modes),
        "images": len(per_image),
        "summary": {},
        "per_image": [],
    }
    for m in modes:
        encode_ms = [r["modes"][m]["encode_ms"] for r in per_image]
        no_text = (
            [r["modes"][m]["encode_ms"] for r in per_image if not r["modes"]["always"]["lines"]]
            if "always" in modes
            else []
        )
        s = {
            "encode_ms": _stats(encode_ms),
            "encode_ms_no_text": _stats(no_text),
            "text_ms": _stats([r["modes"][m]["text_ms"] for r in per_image]),
            "lines": sum(len(r["modes"][m]["lines"]) for r in per_image),
        }
        gates = [r["modes"][m]["gate"] for r in per_image if r["modes"][m]["gate"]]
        if gates:
            counts = {k: sum(g["detector"] == k for g in gates) for k in ("none", "full")}
            counts["page"] = sum(bool(g.get("page")) for g in gates)  # read whole at once (gate step 0)
            s["detector"] = counts
        result["summary"][m] = s
    if "auto" in modes and "always" in modes:
        result["recall"] = line_recall(
            [(r["image"], r["modes"]["always"]["lines"], r["modes"]["auto"]["lines"]) for r in per_image], answers
        )
    for r in per_image:
        result["per_image"].append(
            {
                "image": r["image"],
                "size": r["size"],
                **{
                    m: {
                        "encode_ms": round(v["encode_ms"], 2),
                        "text_ms": round(v["text_ms"], 2),
                        "lines": len(v["lines"]),
                        "gate": v["gate"],
                    }
                    for m, v in r["modes"].items()
                },
            }
        )
    _print(console, result)
    write_json(result, json_path)
    return result


def _print(console: Console, result: dict) -> None:
    t = Table(
        title=f"{result['label'] or result['folder']}: {result['images']} distinct images, preset "
        f"{result['preset']}, encode ms per image (median \\[p25-p75])",
        box=None,
    )
    cols = ("OCR", "encode", "images without text", "text group", "OCR lines", "gate: no text / read (as a page)")
    for col in cols:
        t.add_column(col, justify="left" if col == "OCR" else "right")
    for m, s in result["summary"].items():
        e, n, x = s["encode_ms"], s["encode_ms_no_text"], s["text_ms"]
        det = s.get("detector")
        t.add_row(
            m,
            f"{e['median']:.0f} \\[{e['p25']:.0f}-{e['p75']:.0f}]",
            f"{n['median']:.0f} ({n['n']})" if n["n"] else "-",
            f"{x['median']:.0f}",
            str(s["lines"]),
            f"{det['none']} / {det['full']} ({det['page']})" if det else "-",
        )
    console.print(t)
    r = result.get("recall")
    if r:
        pct = lambda a, b: f"{100.0 * a / b:.1f} %" if b else "-"  # noqa: E731
        console.print(
            f"full-page OCR lines found by the gated encode: {r['found']}/{r['lines']} "
            f"({pct(r['found'], r['lines'])}), read the same {r['read_same']} ({pct(r['read_same'], r['lines'])})"
            + (
                f"; answer lines (inside a query's box): {r['answer_found']}/{r['answer_lines']} found "
                f"({pct(r['answer_found'], r['answer_lines'])}), {r['answer_read_same']} read the same"
                if r["answer_lines"]
                else ""
            ),
            highlight=False,
        )
        for m in r["missed"][:MISSED_SHOWN]:
            score = "" if m["score"] is None else f", confidence {m['score']:.2f}"
            console.print(
                f"  missed: {m['text']!r} in {Path(m['image']).name} (box {m['box']}{score}"
                f"{', an answer line' if m['answer'] else ''})",
                highlight=False,
                markup=False,
            )
        if len(r["missed"]) > MISSED_SHOWN:
            console.print(f"  ... and {len(r['missed']) - MISSED_SHOWN} more (all in the JSON's recall.missed)")
