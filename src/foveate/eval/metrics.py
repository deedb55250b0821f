"""Does a token selection cover what the query asks about?  Exact, area-based metrics on source pixels.

A selection is described by its token boxes (K, 4) and levels (K,) -- or, for a token grid that is not a
pyramid level (the *uniform* baseline: the whole image resized to fit the budget), per-token scales: source
pixels per token pixel, ``2**level`` for a pyramid token -- so the same functions score foveate and any
baseline.  For one query with ground-truth boxes G:

* **coverage** -- the fraction of G's area (the union of its boxes) inside any selected token, whatever its
  level;
* **legible coverage** -- per box, the fraction inside tokens fine enough to keep its content readable (a
  token of scale s keeps text of height h readable when ``h / s >= min_px``, default 8 px; at level l,
  s = 2**l), averaged over the boxes weighted by their area;
* **hit** -- every ground-truth box has legible coverage >= ``hit_threshold`` (default 0.9).

A query whose answer is printed in several places (``repeated_value`` in a data set, ``any_box=True`` here) is
answered by any one of them: its hit is any box's hit, its coverage and legible coverage those of its best box.

Boxes are ``[x0, y0, x1, y1]`` in pixels (x1, y1 exclusive), clipped to the image; degenerate boxes (zero
area after clipping) are ignored and counted in ``degenerate``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..core.config import LEGIBLE_PX

DEFAULT_MIN_PX = LEGIBLE_PX
DEFAULT_HIT_THRESHOLD = 0.9


@dataclass
class QueryMetrics:
    coverage: float
    legible_coverage: float
    hit: bool
    per_box: list[dict] = field(default_factory=list)  # coverage, legible_coverage, max_level per GT box
    degenerate: int = 0

    def to_dict(self) -> dict:
        return {
            "coverage": self.coverage,
            "legible_coverage": self.legible_coverage,
            "hit": self.hit,
            "per_box": self.per_box,
            "degenerate": self.degenerate,
        }


def clip_boxes(boxes: np.ndarray, image_size: tuple[int, int]) -> np.ndarray:
    """Clip (N, 4) boxes to the image (H, W); returns float64 (N, 4)."""
    h, w = image_size
    b = np.asarray(boxes, np.float64).reshape(-1, 4).copy()
    b[:, [0, 2]] = np.clip(b[:, [0, 2]], 0, w)
    b[:, [1, 3]] = np.clip(b[:, [1, 3]], 0, h)
    return b


def legible_level(text_height: float, min_px: float = DEFAULT_MIN_PX) -> int:
    """The coarsest level at which text of this height stays readable (``h / 2**l >= min_px``); -1 if none."""
    if text_height < min_px:
        return -1
    return int(math.floor(math.log2(text_height / min_px) + 1e-9))


def _covered_fraction(gt: np.ndarray, tokens: np.ndarray) -> float:
    """Exact fraction of box ``gt`` (4,) covered by the union of ``tokens`` (K, 4), by rasterising at the
    resolution of the coordinates that occur (no pixel grid assumed)."""
    x0, y0, x1, y1 = gt
    area = (x1 - x0) * (y1 - y0)
    if area <= 0 or len(tokens) == 0:
        return 0.0
    t = tokens[(tokens[:, 0] < x1) & (tokens[:, 2] > x0) & (tokens[:, 1] < y1) & (tokens[:, 3] > y0)]
    if len(t) == 0:
        return 0.0
    t = np.stack(
        [np.maximum(t[:, 0], x0), np.maximum(t[:, 1], y0), np.minimum(t[:, 2], x1), np.minimum(t[:, 3], y1)], -1
    )
    xs = np.unique(np.concatenate([t[:, 0], t[:, 2], [x0, x1]]))
    ys = np.unique(np.concatenate([t[:, 1], t[:, 3], [y0, y1]]))
    cover = np.zeros((len(ys) - 1, len(xs) - 1), bool)
    xi0, xi1 = np.searchsorted(xs, t[:, 0]).tolist(), np.searchsorted(xs, t[:, 2]).tolist()
    yi0, yi1 = np.searchsorted(ys, t[:, 1]).tolist(), np.searchsorted(ys, t[:, 3]).tolist()
    for a, b, c, d in zip(yi0, yi1, xi0, xi1):
        cover[a:b, c:d] = True
    cell = np.outer(np.diff(ys), np.diff(xs))
    return float((cell * cover).sum() / area)


def _union_covered_fraction(gts: np.ndarray, tokens: np.ndarray) -> float:
    """Fraction of the union of ``gts`` covered by the union of ``tokens`` (exact, on the coordinate grid)."""
    if len(gts) == 0:
        return 0.0
    if len(tokens):  # only tokens that touch some box matter (keeps the grid small)
        hits = (
            (tokens[:, None, 0] < gts[None, :, 2])
            & (tokens[:, None, 2] > gts[None, :, 0])
            & (tokens[:, None, 1] < gts[None, :, 3])
            & (tokens[:, None, 3] > gts[None, :, 1])
        ).any(1)
        tokens = tokens[hits]
    xs = np.unique(np.concatenate([gts[:, 0], gts[:, 2]] + ([tokens[:, 0], tokens[:, 2]] if len(tokens) else [])))
    ys = np.unique(np.concatenate([gts[:, 1], gts[:, 3]] + ([tokens[:, 1], tokens[:, 3]] if len(tokens) else [])))

    def paint(boxes: np.ndarray) -> np.ndarray:
        m = np.zeros((len(ys) - 1, len(xs) - 1), bool)
        rows = np.searchsorted(ys, boxes[:, [1, 3]]).tolist()  # every box's cell span at once
        cols = np.searchsorted(xs, boxes[:, [0, 2]]).tolist()
        for (r0, r1), (c0, c1) in zip(rows, cols):
            m[r0:r1, c0:c1] = True
        return m

    g = paint(gts)
    cell = np.outer(np.diff(ys), np.diff(xs))
    total = float((cell * g).sum())
    if total <= 0:
        return 0.0
    covered = g & paint(tokens) if len(tokens) else np.zeros_like(g)
    return float((cell * covered).sum() / total)


def query_metrics(
    token_boxes: np.ndarray,
    token_levels: np.ndarray | None,
    gt_boxes,
    image_size: tuple[int, int],
    text_heights=None,
    min_px: float = DEFAULT_MIN_PX,
    hit_threshold: float = DEFAULT_HIT_THRESHOLD,
    token_scales=None,
    any_box: bool = False,
) -> QueryMetrics:
    """Coverage, legible coverage and hit of one selection against one query's ground truth.

    Args:
        token_boxes: (K, 4) selected token boxes in source pixels.  token_levels: (K,) their pyramid levels.
        gt_boxes: (N, 4) ground-truth boxes.
        image_size: (H, W).
        text_heights: per GT box, the height of its text (e.g. FUNSD's line height); default: the box height.
        token_scales: (K,) source pixels per token pixel, instead of ``token_levels`` (level l = scale 2**l);
            for token grids that are not pyramid levels, e.g. an image resized by 2.4 to fit a budget.
        any_box: the boxes are alternatives (the same answer printed several times): any one answers.
    """
    tok = clip_boxes(token_boxes, image_size)
    if token_scales is None:
        if token_levels is None:
            raise ValueError("give token_levels or token_scales")
        scales = np.exp2(np.asarray(token_levels, np.float64).reshape(-1))
    else:
        scales = np.asarray(token_scales, np.float64).reshape(-1)
    if len(scales) != len(tok):
        raise ValueError(f"{len(scales)} token levels/scales for {len(tok)} token boxes")
    raw = np.asarray(gt_boxes, np.float64).reshape(-1, 4)
    heights = raw[:, 3] - raw[:, 1] if text_heights is None else np.asarray(text_heights, np.float64).reshape(-1)
    if len(heights) != len(raw):
        raise ValueError(f"{len(heights)} text heights for {len(raw)} boxes")
    gts = clip_boxes(raw, image_size)
    keep = (gts[:, 2] > gts[:, 0]) & (gts[:, 3] > gts[:, 1])
    degenerate = int((~keep).sum())
    gts, heights = gts[keep], heights[keep]
    if len(gts) == 0:
        return QueryMetrics(0.0, 0.0, False, [], degenerate)
    per_box, leg_area, area_sum = [], 0.0, 0.0
    for g, h in zip(gts, heights):
        lmax = legible_level(float(h), min_px)
        cov = _covered_fraction(g, tok)
        sharp = float(h) / scales >= min_px * (1.0 - 1e-9)  # h / s >= min_px (levels: the same as l <= lmax)
        leg = _covered_fraction(g, tok[sharp]) if sharp.any() else 0.0
        a = (g[2] - g[0]) * (g[3] - g[1])
        leg_area += leg * a
        area_sum += a
        per_box.append({"coverage": cov, "legible_coverage": leg, "max_level": lmax})
    if any_box:
        best = max(range(len(per_box)), key=lambda i: (per_box[i]["legible_coverage"], per_box[i]["coverage"]))
        return QueryMetrics(
            per_box[best]["coverage"],
            per_box[best]["legible_coverage"],
            any(b["legible_coverage"] >= hit_threshold for b in per_box),
            per_box,
            degenerate,
        )
    coverage = _union_covered_fraction(gts, tok)
    legible = leg_area / area_sum if area_sum > 0 else 0.0
    hit = all(b["legible_coverage"] >= hit_threshold for b in per_box)
    return QueryMetrics(coverage, legible, hit, per_box, degenerate)
