"""Means per budget, group and method, hand-computed."""

from __future__ import annotations

import pytest

from foveate.eval.summary import aggregate


def test_aggregate_hand_computed():
    recs = [
        {
            "budget": 64,
            "bucket": "tiny <0.1%",
            "meta": {"k": True},
            "methods": {"foveate": {"coverage": 1.0, "legible_coverage": 0.5, "hit": False, "tokens": 60}},
        },
        {
            "budget": 64,
            "bucket": "large >=10%",
            "meta": {"k": False},
            "methods": {
                "foveate": {"coverage": 0.5, "legible_coverage": 0.25, "hit": True, "tokens": 64},
                "random": {"coverage": 1.0, "legible_coverage": 1.0, "hit": 0.4, "tokens": 64},
            },
        },
    ]
    s = aggregate(recs, ["foveate", "random"])
    f = s["64"]["all"]["foveate"]
    assert (f["coverage"], f["legible_coverage"], f["hit"], f["tokens"], f["n"]) == (0.75, 0.375, 0.5, 62, 2)
    assert s["64"]["all"]["random"]["hit"] == pytest.approx(0.4) and s["64"]["all"]["random"]["n"] == 1
    b = aggregate(recs, ["foveate"], key="bucket")
    assert list(b["64"]) == ["tiny <0.1%", "large >=10%"]
    assert list(aggregate(recs, ["foveate"], key="k")["64"]) == ["False", "True"]


def test_grouped_by_answer_boxes_with_the_ocr_check():
    """``key="boxes"``: one answer box or several; the report's table adds the OCR check's exact reads per group."""
    from types import SimpleNamespace

    from foveate.eval.report import group_rows

    def rec(n_boxes, hit, read, full):
        return {
            "budget": 273,
            "bucket": "small 0.1-1%",
            "n_boxes": n_boxes,
            "meta": {},
            "methods": {"foveate": {"coverage": 1.0, "legible_coverage": float(hit), "hit": hit, "tokens": 273}},
            "ocr": {"foveate": {"exact": read, "fuzzy": read}, "full": {"exact": full, "fuzzy": full}},
        }

    recs = [rec(1, True, True, True), rec(1, True, False, True), rec(3, False, False, True), rec(2, True, True, True)]
    g = aggregate(recs, ["foveate"], key="boxes")["273"]
    assert list(g) == ["1 box", "2+ boxes"] and g["1 box"]["n"] == g["2+ boxes"]["n"] == 2
    assert g["2+ boxes"]["foveate"]["hit"] == 0.5 and g["1 box"]["ocr"]["foveate"]["exact"] == 0.5
    result = SimpleNamespace(records=recs, config=SimpleNamespace(methods=["foveate"]))
    header, rows = group_rows(result, "boxes")
    assert header[-1].startswith("OCR exact") and rows == [
        ["273", "1 box", "2", "100.0 / 100.0", "50.0 / 100.0 (2)"],
        ["273", "2+ boxes", "2", "50.0 / 50.0", "50.0 / 100.0 (2)"],
    ]
