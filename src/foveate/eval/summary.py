"""Means over the records of a run, per budget, group and method: what the result's JSON, the report's tables and
the plots all show."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from .answers import OCR_METHODS
from .data import SIZE_BUCKETS


def mean_scores(rows: list[dict]) -> dict:
    return {k: float(np.mean([float(r[k]) for r in rows])) for k in ("coverage", "legible_coverage", "hit", "tokens")}


#: ``key="boxes"`` groups the queries by how many ground-truth boxes their answer has (one, or several that must
#: all be legible: a value printed in pieces, a column of values)
BOXES_KEY = "boxes"


def _group_key(rec: dict, key: str | None) -> str:
    if key is None:
        return "all"
    if key == "bucket":
        return rec["bucket"]
    if key == BOXES_KEY:
        return "1 box" if rec.get("n_boxes", 1) <= 1 else "2+ boxes"
    v = rec["meta"].get(key)
    return json.dumps(v) if isinstance(v, (list, dict)) else str(v)


def aggregate(records: list[dict], methods: Sequence[str], key: str | None = None) -> dict:
    """Means per budget, group and method: ``{budget: {group: {"n": .., method: {coverage, legible_coverage,
    hit, tokens[, fell_back]}, "ocr": {method: {exact, fuzzy, n}}}}}`` (``fell_back``: for a foveated row, the share
    of the queries the uniform floor answered instead).  ``key``: ``None`` (one group, "all"), ``"bucket"``
    (box size), ``"boxes"`` (one answer box or several, :data:`BOXES_KEY`) or a metadata key of the set (e.g.
    ``isthing``)."""
    acc: dict = defaultdict(lambda: defaultdict(list))
    for r in records:
        acc[(r["budget"], _group_key(r, key))]["_"].append(r)
    out: dict = {}
    order = [b for b, _ in SIZE_BUCKETS] if key == "bucket" else None
    for (budget, group), d in sorted(
        acc.items(), key=lambda kv: (kv[0][0], order.index(kv[0][1]) if order else kv[0][1])
    ):
        recs = d["_"]
        g: dict = {"n": len(recs)}
        for m in methods:
            rows = [r["methods"][m] for r in recs if m in r["methods"]]
            if rows:
                g[m] = mean_scores(rows) | {"n": len(rows)}
                fell = [float(x["fell_back"]) for x in rows if "fell_back" in x]
                if fell:  # share of the queries the uniform floor answered (a foveated row)
                    g[m]["fell_back"] = float(np.mean(fell))
        ocr: dict = {}
        for m in OCR_METHODS:
            rows = [r["ocr"][m] for r in recs if m in r.get("ocr", {})]
            if rows:
                ocr[m] = {
                    "exact": float(np.mean([x["exact"] for x in rows])),
                    "fuzzy": float(np.mean([x["fuzzy"] for x in rows])),
                    "n": len(rows),
                }
        if ocr:
            g["ocr"] = ocr
        same = [r["same_as_query_blind"] for r in recs if "same_as_query_blind" in r]
        if same:
            g["same_as_query_blind"] = float(np.mean(same))
        out.setdefault(str(budget), {})[group] = g
    return out
