"""The paired comparison ``scripts/compare_weights.py --paired`` prints: questions gained and lost against one row,
counted on hand-made records, and the exact sign test checked against SciPy's binomial test."""

from __future__ import annotations

import pytest
from scipy.stats import binomtest

from foveate.train.evaluate import format_table, hit_table, paired_table, sign_test


def _rec(set_: str, budget: int, **hits: bool) -> dict:
    return {"set": set_, "budget": budget, "methods": {m: (h, 0.0, "pyramid") for m, h in hits.items()}}


def test_sign_test_equals_scipys_exact_binomial_test():
    for gained in range(0, 12):
        for lost in range(0, 12):
            n = gained + lost
            want = binomtest(gained, n, 0.5).pvalue if n else 1.0
            assert sign_test(gained, lost) == pytest.approx(want, abs=1e-12), (gained, lost)
    assert sign_test(7, 0) == pytest.approx(2 / 2**7)
    for gained, lost in ((600, 700), (1200, 1), (1300, 1300)):  # past a float's range of 2**n
        assert sign_test(gained, lost) == pytest.approx(
            binomtest(gained, gained + lost, 0.5).pvalue, rel=1e-9, abs=1e-300
        )


def test_paired_table_counts_discordant_questions_per_set_and_budget():
    recs = [
        _rec("forms", 64, base=True, new=False, other=True),
        _rec("forms", 64, base=False, new=True, other=False),
        _rec("forms", 64, base=False, new=True, other=False),
        _rec("forms", 64, base=True, new=True, other=True),  # concordant: counted in n only
        _rec("receipts", 64, base=False, new=False, other=True),
        _rec("forms", 144, base=True, new=False, other=False),
    ]
    t = paired_table(recs, "base")
    assert t["forms"][64]["new"].startswith("+2 / -1 ") and t["forms"][64]["n"] == 4
    assert t["forms"][64]["other"] == "+0 / -0 (p 1.00)"
    assert t["receipts"][64]["other"] == "+1 / -0 (p 1.00)"
    assert t["all"][64]["new"] == f"+2 / -1 (p {sign_test(2, 1):.2f})" and t["all"][64]["n"] == 5
    assert t["forms"][144]["new"].startswith("+0 / -1 ") and "base" not in t["forms"][144]
    # the hit % a paired count explains: base 2 of 4, new 3 of 4 on forms at 64
    h = hit_table(recs)["forms"][64]
    assert (h["base"], h["new"]) == (50.0, 75.0)
    text = format_table(t, ["new", "other"], "gained / lost")
    assert "| forms | 64 | 4 | +2 / -1 (p 1.00) | +0 / -0 (p 1.00) |" in text


def test_format_table_keeps_numbers_to_one_decimal():
    assert "| forms | 64 | 1 | 100.0 |" in format_table(hit_table([_rec("forms", 64, a=True)]), ["a"], "hit")
