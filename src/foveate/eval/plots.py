"""Figures of a run (matplotlib, optional): ``curves.png`` (metric vs budget per method) and ``gallery.png`` (the
worst queries: overlay and mosaic around the ground-truth boxes)."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.errors import DatasetError, FoveateError
from .baselines import METHOD_LABELS
from .data import check_boxes, read_queries
from .summary import aggregate

if TYPE_CHECKING:
    from .runner import EvalResult


def load_pyplot():
    """matplotlib's pyplot on the Agg backend, or a FoveateError saying what to install."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise FoveateError("plots need matplotlib: pip install 'foveate[plots]' (or run without --plots)") from None
    return plt


def plot_curves(result: EvalResult, path: Path) -> Path:
    """Coverage, legible coverage and hit rate vs budget, one line per method."""
    plt = load_pyplot()
    summ = aggregate(result.records, result.config.methods)
    budgets = [int(b) for b in summ]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for ax, metric, label in zip(
        axes, ("coverage", "legible_coverage", "hit"), ("coverage", "legible coverage", "hit rate")
    ):
        for m in result.config.methods:
            ys = [summ[str(b)]["all"].get(m, {}).get(metric) for b in budgets]
            if any(y is not None for y in ys):
                style: dict[str, dict[str, Any]] = {
                    "oracle": dict(linestyle="--"),
                    "full": dict(linestyle="--"),
                    "query_blind": dict(linestyle=":", marker="s", markersize=9, markerfacecolor="none"),
                }
                ax.plot(
                    budgets,
                    [np.nan if y is None else 100 * y for y in ys],
                    **({"marker": "o"} | style.get(m, {})),
                    label=METHOD_LABELS.get(m, m),
                    zorder=3 if m.startswith("foveate") else 2,
                )
        ax.set_xscale("log", base=2)
        ax.set_xticks(budgets, [str(b) for b in budgets])
        ax.set_xlabel("budget (tokens)")
        ax.set_ylabel(f"{label} (%)")
        ax.set_ylim(0, 102)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{Path(result.data_dir).name}: {result.counts.get('evaluated_queries', 0)} queries")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def worst_records(result: EvalResult, n: int, budget: int | None = None, per_image: int = 1) -> list[dict]:
    """The ``n`` records with the lowest foveate legible coverage (then coverage) at ``budget`` (default: the
    budget nearest 273), at most ``per_image`` from one image."""
    budgets = result.config.budgets
    b = budget if budget is not None else min(budgets, key=lambda v: abs(v - 273))
    recs = [r for r in result.records if r["budget"] == b and "foveate" in r["methods"]]
    recs.sort(
        key=lambda r: (r["methods"]["foveate"]["legible_coverage"], r["methods"]["foveate"]["coverage"], r["line"])
    )
    out: list[dict] = []
    seen: Counter[str] = Counter()
    for r in recs:
        if seen[r["image"]] < per_image:
            out.append(r)
            seen[r["image"]] += 1
        if len(out) == n:
            break
    return out


def plot_gallery(result: EvalResult, path: Path, n: int = 12) -> Path:
    """The worst queries (one per image), two panels each: foveate's overlay (tokens outlined by level) with the
    ground-truth boxes in red, and the mosaic (what the VLM sees) cropped around those boxes.  The images are
    encoded again here (a handful; nothing from the run is kept in memory)."""
    import cv2

    from ..core.io import load_image
    from ..core.texture import encode_array
    from ..render import render_mosaic, render_overlay
    from ..selection import select

    plt = load_pyplot()
    recs = worst_records(result, n)
    cols = 2 * min(2, len(recs))
    rows = math.ceil(2 * len(recs) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.0 * cols, 4.4 * rows), squeeze=False)
    data_dir = Path(result.data_dir)
    queries = {q.line: q for q in read_queries(data_dir)[0]}
    panels = iter(axes.ravel())
    for rec in recs:
        tex = encode_array(load_image(data_dir / rec["image"]), result.config.encode)
        sel = select(
            tex,
            rec["query"],
            config=dataclasses.replace(result.config.select, budget=rec["budget"], cut=False),
            weights=result.config.weights,
        )
        q, _ = check_boxes(queries[rec["line"]], tex.image_size)
        if q is None:  # the run kept its boxes: the data set changed since
            raise DatasetError(f"{data_dir}, line {rec['line']}: no box of the query lies inside its image any more")
        thick = max(2, round(max(tex.image_size) / 300))
        views = [render_overlay(tex.image, sel), render_mosaic(tex, sel)]
        for img in views:
            for x0, y0, x1, y1 in q.boxes:
                cv2.rectangle(img, (int(x0), int(y0)), (int(x1) - 1, int(y1) - 1), (255, 0, 0), thick)
        # the crop: the boxes' bounding box with as much context again (at least 160 px), inside the image
        h, w = tex.image_size
        bx0, by0 = q.boxes[:, 0].min(), q.boxes[:, 1].min()
        bx1, by1 = q.boxes[:, 2].max(), q.boxes[:, 3].max()
        mx, my = max(bx1 - bx0, 160) / 2, max(by1 - by0, 160) / 2
        cx0, cy0 = int(max(0, bx0 - mx)), int(max(0, by0 - my))
        cx1, cy1 = int(min(w, bx1 + mx)), int(min(h, by1 + my))
        f = rec["methods"]["foveate"]
        ax = next(panels)
        ax.imshow(views[0])
        ax.set_title(
            f"line {rec['line']}: {rec['query'][:40]}\nlegible {100 * f['legible_coverage']:.0f}%, "
            f"coverage {100 * f['coverage']:.0f}%, {f['tokens']} tokens",
            fontsize=8,
        )
        ax = next(panels)
        ax.imshow(views[1][cy0:cy1, cx0:cx1])
        ax.set_title(f"mosaic near the boxes ({rec['image'][-28:]})", fontsize=8)
    for ax in axes.ravel():
        ax.axis("off")
    fig.suptitle(
        f"{Path(result.data_dir).name}: worst {len(recs)} queries at budget {recs[0]['budget']}, one per "
        "image (red: ground truth)",
        fontsize=10,
    )
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.35 / fig.get_figheight()))  # leave room for the title
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
