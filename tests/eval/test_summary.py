"""Means per budget, group and method, hand-computed."""

from __future__ import annotations

import pytest

from foveate.eval.summary import aggregate


def test_aggregate_hand_computed():
    recs = [{"budget": 64, "bucket": "tiny <0.1%", "meta": {"k": True},
             "methods": {"foveate": {"coverage": 1.0, "legible_coverage": 0.5, "hit": False, "tokens": 60}}},
            {"budget": 64, "bucket": "large >=10%", "meta": {"k": False},
             "methods": {"foveate": {"coverage": 0.5, "legible_coverage": 0.25, "hit": True, "tokens": 64},
                         "random": {"coverage": 1.0, "legible_coverage": 1.0, "hit": 0.4, "tokens": 64}}}]
    s = aggregate(recs, ["foveate", "random"])
    f = s["64"]["all"]["foveate"]
    assert (f["coverage"], f["legible_coverage"], f["hit"], f["tokens"], f["n"]) == (0.75, 0.375, 0.5, 62, 2)
    assert s["64"]["all"]["random"]["hit"] == pytest.approx(0.4) and s["64"]["all"]["random"]["n"] == 1
    b = aggregate(recs, ["foveate"], key="bucket")
    assert list(b["64"]) == ["tiny <0.1%", "large >=10%"]
    assert list(aggregate(recs, ["foveate"], key="k")["64"]) == ["False", "True"]

