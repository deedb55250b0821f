"""The OCR answer check: the matching rule against independent references, and the unavailable path."""

from __future__ import annotations

import json
import sys
from collections import namedtuple

import numpy as np
import pytest

from foveate.core.errors import FoveateError
from foveate.eval.answers import answer_found, lines_at, normalize_text, query_answer_found, substring_edit_distance
from foveate.eval.data import parse_query_line
from foveate.eval.report import render_markdown
from foveate.eval.runner import EvalConfig, run_eval
from foveate.eval.summary import aggregate

from .common import FAST, FIELDS, make_eval_set

OcrLine = namedtuple("OcrLine", "text box score")


def test_normalize_text():
    assert normalize_text("10/ 13/ 99") == normalize_text("10/13/99") == "101399"
    assert normalize_text("  $1,234.50 ") == "123450"
    assert normalize_text("J. ALVAREZ") == "jalvarez"
    assert normalize_text("Ｆｕｌｌ－width ß") == "fullwidthss"  # NFKC + casefold
    assert normalize_text("- / .") == ""


def _levenshtein(a: str, b: str) -> int:
    d = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, d[0] = d[0], i
        for j, cb in enumerate(b, 1):
            prev, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, prev + (ca != cb))
    return d[-1]


def test_substring_edit_distance_against_all_substrings():
    rng = np.random.default_rng(0)
    for _ in range(200):
        p = "".join(rng.choice(list("abc"), rng.integers(0, 6)))
        t = "".join(rng.choice(list("abc"), rng.integers(0, 9)))
        ref = min(_levenshtein(p, t[i:j]) for i in range(len(t) + 1) for j in range(i, len(t) + 1))
        assert substring_edit_distance(p, t) == ref, (p, t)


def test_answer_found():
    assert answer_found("10/ 13/ 99", "DATE: 10/13/99") == (True, True)
    assert answer_found("Kevin Narko", "FROM: Kevin Narko") == (True, True)
    assert answer_found("Kevin Narko", "FROM: Kevln Narko") == (False, True)  # 1 error in 10 characters
    assert answer_found("Kevin Narko", "FROM: Kcvln Nark") == (False, False)  # 3 errors: more than 20 %
    assert answer_found("4", "3") == (False, False)  # short answers must match exactly
    assert answer_found("N/A", "n a") == (True, True)
    assert answer_found("-", "anything") is None  # nothing readable to find


def test_lines_at_reads_only_at_the_box_in_reading_order():
    lines = [
        OcrLine("Narko", (160, 286, 234, 304), 0.9),
        OcrLine("Kevin", (100, 287, 150, 303), 0.9),
        OcrLine("Narko", (160, 500, 234, 518), 0.9),
        OcrLine("second line", (100, 310, 200, 326), 0.9),
    ]
    assert lines_at(lines, [(100, 286, 234, 304)]) == "Kevin Narko"
    assert lines_at(lines, [(100, 286, 234, 326)]) == "Kevin Narko second line"
    assert lines_at(lines, [(400, 0, 500, 20)]) == ""
    q = parse_query_line(
        json.dumps(
            {
                "image": "a",
                "query": "q",
                "boxes": [[100, 286, 234, 304], [160, 500, 234, 518]],
                "answer_text": ["Kevin Narko", "Narko"],
            }
        ),
        1,
    )
    assert query_answer_found(q, lines) == {"exact": True, "fuzzy": True}
    q2 = parse_query_line(
        json.dumps({"image": "a", "query": "q", "boxes": [[160, 500, 234, 518]], "answer_text": ["Kevin Narko"]}), 1
    )
    assert query_answer_found(q2, lines) == {"exact": False, "fuzzy": False}  # right words, wrong place


def test_ocr_unavailable_is_reported_not_faked(result):
    assert result.ocr["status"] == "unavailable" and "foveate.query.text" in result.ocr["reason"]
    assert all("ocr" not in r for r in result.records)
    md = render_markdown(result)
    assert "| unavailable |" in md and "OCR column: unavailable" in md


def test_ocr_on_without_ocr_module_is_an_error(eval_set, monkeypatch):
    monkeypatch.setitem(sys.modules, "foveate.query.text", None)
    with pytest.raises(FoveateError, match="OCR is not available"):
        run_eval(eval_set[0], EvalConfig(budgets=(64,), encode=FAST, ocr="on"))


@pytest.mark.slow
def test_real_ocr_reads_the_answers_on_the_full_page(tmp_path):
    """Live once the OCR module (foveate.query.text) is installed; skipped before."""
    pytest.importorskip("foveate.query.text")
    make_eval_set(tmp_path, bad_lines=False)
    r = run_eval(tmp_path, EvalConfig(budgets=(576,), encode=FAST, random_seeds=1, ocr="on"))
    s = aggregate(r.records, r.config.methods)["576"]["all"]["ocr"]
    assert s["full"]["n"] == 2 * len(FIELDS) and s["full"]["fuzzy"] >= 0.8
