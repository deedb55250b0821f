"""Video evaluation (``foveate eval-video``): per-frame coverage of an annotated object box (a ``queries.jsonl`` of
frames with one box each, e.g. DAVIS 2016), the incremental updates against encoding every frame from scratch, in
one run (:func:`eval_boxes`).  The figures in EVAL.md ("Video") come from it:

    foveate eval-video ../shared/data/davis2016_video --json out/video-eval.json
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from ..bench.common import machine_info, write_json
from ..core.config import EncodeConfig, SelectConfig
from ..core.device import resolve_device
from ..core.errors import DatasetError
from ..core.io import load_image
from ..video import VideoPredictor
from .data import EvalQuery, Problem, read_queries
from .metrics import query_metrics

PROTOCOLS = {
    "prev-box": "box prompt = the previous frame's ground-truth box (frame 0: its own box)",
    "first-box": "box prompt on frame 0 only; later frames query-blind, carried by the memory (prev_relevance)",
    "blind": "no query on any frame (saliency and memory only)",
}


def eval_boxes(
    root: str | Path,
    *,
    protocols: tuple[str, ...] = tuple(PROTOCOLS),
    budget: int = 273,
    preset: str = "fast",
    approximate: tuple[float, ...] = (8.0, 16.0),
    device: str = "cpu",
    console: Console | None = None,
    json_path: Path | None = None,
) -> dict[str, Any]:
    """Per-frame coverage of the annotated box by ``budget`` level-0 tokens (top-k, no gist), incremental sessions
    against a from-scratch one, fed the same frames and queries in one run, per sequence and overall.

    Sessions: ``scratch`` (``incremental=False``), ``incremental`` (the defaults: the motion-compensated update),
    and per threshold t in ``approximate`` an ``approx t=...`` session with the exact update that re-encodes only
    the changed tiles whatever they cost (``update="exact", change_threshold=t, refresh_neighbours=False,
    full_frame_share=1``): what skipping work costs without motion compensation.  ``root`` holds ``queries.jsonl`` with
    ``image``, ``boxes``, ``sequence`` and ``frame_index`` per line (the DAVIS 2016 set's layout).
    """
    console = console or Console()
    root = Path(root)
    queries, problems, _ = read_queries(root)  # a malformed line is a problem of its line, as in `foveate eval`
    seqs: dict[str, list[EvalQuery]] = defaultdict(list)
    for q in queries:
        seq, frame = q.meta.get("sequence"), q.meta.get("frame_index")
        if not isinstance(seq, str) or isinstance(frame, bool) or not isinstance(frame, int):
            problems.append(Problem(q.line, "schema", "a video line needs 'sequence' (text) and 'frame_index'", True))
            continue
        seqs[seq].append(q)
    for problem in problems:
        console.print(f"skipped: {problem}", highlight=False, markup=False)
    if not seqs:
        raise DatasetError(f"no usable video line in {root / 'queries.jsonl'} (sequence, frame_index, image, boxes)")
    cfg = SelectConfig(budget=budget, mode="topk", gist=False)
    predictor = VideoPredictor(EncodeConfig(preset=preset), select_config=cfg, device=device)
    variants: dict[str, dict] = {"scratch": {"incremental": False}, "incremental": {}}
    for t in approximate:
        variants[f"approx t={t:g}"] = {
            "change_threshold": t,
            "update": "exact",
            "refresh_neighbours": False,
            "full_frame_share": 1.0,
        }
    cov: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    reenc: dict[tuple[str, str], list[float]] = defaultdict(list)
    for seq, items in seqs.items():
        items.sort(key=lambda q: q.meta["frame_index"])
        states = {(p, v): predictor.init_state(**kw) for p in protocols for v, kw in variants.items()}
        prev_box = None
        for q in items:
            image = load_image(root / q.image)
            gt = np.asarray(q.boxes, np.float64).reshape(-1, 4)
            first = prev_box is None
            for (p, v), st in states.items():
                stats = predictor.add_frame(st, image)
                if p == protocols[0]:
                    reenc[(seq, v)].append(stats.reencoded_share)
                box = gt if prev_box is None else prev_box  # the first frame: its own box
                query = {"boxes": [tuple(b) for b in box]} if p == "prev-box" or (p == "first-box" and first) else None
                sel = predictor.select(st, query)
                cov[(seq, p, v)].append(query_metrics(sel.boxes, sel.levels, gt, image.shape[:2]).coverage)
            prev_box = gt
    rows: list[dict[str, Any]] = []
    for p in protocols:
        for seq in list(seqs) + ["all"]:
            names = list(seqs) if seq == "all" else [seq]
            scratch = np.array([c for s in names for c in cov[(s, p, "scratch")]])
            for v in list(variants)[1:]:
                inc = np.array([c for s in names for c in cov[(s, p, v)]])
                rows.append(
                    {
                        "protocol": p,
                        "sequence": seq,
                        "session": v,
                        "frames": len(inc),
                        "coverage": float(inc.mean()),
                        "coverage_scratch": float(scratch.mean()),
                        "difference_points": 100 * float(inc.mean() - scratch.mean()),
                        "max_frame_difference_points": 100 * float(np.abs(inc - scratch).max()),
                        "reencoded_share": float(np.mean([r for s in names for r in reenc[(s, v)]])),
                    }
                )
    spans = {"frame 0": (0, 1), "frames 1-4": (1, 5), "frames 5-19": (5, 20), "frames 20+": (20, 10**9)}

    def mean_or_none(values: list[float]) -> float | None:
        return 100 * float(np.mean(values)) if values else None

    by_position = {
        p: {
            span: mean_or_none([c for s in seqs for c in cov[(s, p, "scratch")][a:b]]) for span, (a, b) in spans.items()
        }
        for p in protocols
    }
    result = {
        "root": str(root),
        "budget": budget,
        "selection": "topk, no gist (level-0 tokens)",
        "preset": preset,
        "defaults": dict(vars(predictor.video).items()),
        "variants": variants,
        "protocols": {p: PROTOCOLS[p] for p in protocols},
        "rows": rows,
        "scratch_coverage_by_frame_position": by_position,
        "machine": machine_info(resolve_device(device)),
    }
    table = Table(
        "protocol",
        "sequence",
        "session",
        "frames",
        "coverage",
        "scratch",
        "diff (points)",
        "max |diff| per frame",
        "re-encoded",
        box=None,
    )
    for r in rows:
        table.add_row(
            r["protocol"],
            r["sequence"],
            r["session"],
            str(r["frames"]),
            f"{100 * r['coverage']:.2f}",
            f"{100 * r['coverage_scratch']:.2f}",
            f"{r['difference_points']:+.2f}",
            f"{r['max_frame_difference_points']:.2f}",
            f"{100 * r['reencoded_share']:.1f}%",
        )
    console.print(
        f"[bold]{root}[/]: box coverage at {budget} level-0 tokens (top-k, no gist), preset {preset}; "
        f"incremental sessions vs encoding every frame from scratch",
        highlight=False,
    )
    console.print(table)
    pos = Table("protocol", *spans, box=None)
    for p, vals in by_position.items():
        pos.add_row(p, *["-" if v is None else f"{v:.2f}" for v in vals.values()])
    console.print("scratch session's coverage (%) by position in the sequence (all sequences):")
    console.print(pos)
    write_json(result, json_path)
    return result
