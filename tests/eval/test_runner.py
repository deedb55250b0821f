"""The runner: each image encoded once, records and their invariants, sampling, per-line budget problems, and the
run's configuration (selection settings and variants)."""

from __future__ import annotations

import sys

import pytest

from foveate.core.config import SelectConfig
from foveate.core.errors import ConfigError
from foveate.eval.config import EvalConfig, parse_select_value, parse_variant
from foveate.eval.runner import run_eval
from foveate.eval.summary import aggregate

from .common import FAST, FIELDS, make_eval_set


def test_each_image_is_encoded_once(tmp_path, monkeypatch):
    import foveate.core.texture

    make_eval_set(tmp_path, bad_lines=False)
    calls = []
    real = foveate.core.texture.encode_array
    monkeypatch.setattr(foveate.core.texture, "encode_array", lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setitem(sys.modules, "foveate.query.text", None)
    r = run_eval(
        tmp_path,
        EvalConfig(
            budgets=(64, 144, 273), encode=FAST, random_seeds=2, variants=(("topk", SelectConfig(mode="topk")),)
        ),
        workers=1,
    )
    assert len(calls) == r.counts["encodes"] == 2
    assert r.counts["records"] == 3 * len(FIELDS) * 2


def test_records_and_invariants(result):
    cfg = result.config
    assert cfg.methods == ["foveate", "uniform", "random", "query_blind", "oracle", "full"]
    for rec in result.records:
        ms = rec["methods"]
        assert set(ms) == set(cfg.methods)
        for name, m in ms.items():
            assert 0.0 <= m["legible_coverage"] <= m["coverage"] + 1e-12 <= 1.0 + 1e-12
            if name != "full":
                assert m["tokens"] <= rec["budget"]
        assert ms["full"]["coverage"] == 1.0
        assert ms["foveate"]["coverage"] == 1.0  # the quadtree covers the image
        # today no query term reads the text, so foveate is query-blind on text queries
        assert rec["same_as_query_blind"]
        assert ms["oracle"]["legible_coverage"] >= ms["query_blind"]["legible_coverage"] - 1e-9
    # more budget never hurts the oracle on average
    s = aggregate(result.records, cfg.methods)
    assert s["144"]["all"]["oracle"]["legible_coverage"] >= s["64"]["all"]["oracle"]["legible_coverage"]


@pytest.mark.skipif("fork" not in __import__("multiprocessing").get_all_start_methods(), reason="no fork")
def test_workers_give_the_records_of_one_process(eval_set, monkeypatch):
    """Images shared among forked workers: the same records, problems and counts, in the same order, as one
    process (a set that reads no text takes every core by default)."""
    from foveate.core import device

    root, _ = eval_set
    monkeypatch.setitem(sys.modules, "foveate.query.text", None)
    cfg = EvalConfig(budgets=(64, 144), encode=FAST, random_seeds=2)
    one, two = run_eval(root, cfg, workers=1), run_eval(root, cfg, workers=2)
    assert one.records == two.records and one.records
    assert [p.to_dict() for p in one.problems] == [p.to_dict() for p in two.problems] and one.problems
    assert one.counts == two.counts and one.counts["encodes"] == 2
    assert set(one.timings_s) == set(two.timings_s)
    seen = []
    monkeypatch.setattr(device, "eval_workers", lambda: seen.append(1) or 1)
    run_eval(root, cfg)
    assert seen == [1]  # no text read: the default asks how many cores


def test_limit_samples_queries_reproducibly(eval_set, monkeypatch):
    root, _ = eval_set
    monkeypatch.setitem(sys.modules, "foveate.query.text", None)
    a = run_eval(root, EvalConfig(budgets=(64,), encode=FAST, limit=4, seed=5, random_seeds=1, baselines=()))
    b = run_eval(root, EvalConfig(budgets=(64,), encode=FAST, limit=4, seed=5, random_seeds=1, baselines=()))
    assert [r["line"] for r in a.records] == [r["line"] for r in b.records]
    assert len(a.records) <= 4 and a.config.methods == ["foveate"]


def test_budget_below_the_coarsest_cover_is_reported_per_line(eval_set, monkeypatch):
    root, _ = eval_set
    monkeypatch.setitem(sys.modules, "foveate.query.text", None)
    r = run_eval(root, EvalConfig(budgets=(3, 64), encode=FAST, random_seeds=1, select=SelectConfig(mode="quadtree")))
    assert r.counts["problem:budget"] > 0
    assert {rec["budget"] for rec in r.records} == {64}
    assert all("budget 3" in p.message for p in r.problems if p.kind == "budget")
    # mode auto takes the top-k layout where the quadtree cannot start: budget 3 is evaluated, within budget
    r = run_eval(root, EvalConfig(budgets=(3,), encode=FAST, random_seeds=1))
    assert "problem:budget" not in r.counts and r.records
    assert all(m["tokens"] <= 3 for rec in r.records for k, m in rec["methods"].items() if k != "full")
    # every row on the same queries: a quadtree variant that cannot start drops the query at that budget for all rows
    r = run_eval(
        root,
        EvalConfig(budgets=(3, 64), encode=FAST, random_seeds=1, variants=(("quad", SelectConfig(mode="quadtree")),)),
    )
    assert r.counts["problem:budget"] > 0 and {rec["budget"] for rec in r.records} == {64}


def test_parse_select_values_and_variants():
    assert parse_select_value("topk_levels", "4,3,2,1,0") == (4, 3, 2, 1, 0)
    assert parse_select_value("topk_candidates", "500,none") == (500, None)
    assert parse_select_value("topk_candidates", "default") is None
    assert parse_select_value("gist", "false") is False
    name, cfg = parse_variant(
        "cascade5:mode=topk:topk_levels=4,3,2,1,0:topk_candidates=500,500,500,none", SelectConfig()
    )
    assert name == "cascade5" and cfg.mode == "topk" and cfg.topk_levels == (4, 3, 2, 1, 0)
    for bad in ("x:budget=3", ":mode=topk", "x:mode", "x:gist=maybe", "x:topk_levels=4,2"):
        with pytest.raises(ConfigError):
            parse_variant(bad, SelectConfig())
    with pytest.raises(ConfigError):
        EvalConfig(baselines=("uniform", "psychic"))
    with pytest.raises(ConfigError):
        EvalConfig(variants=(("a", SelectConfig()), ("a", SelectConfig())))


def test_fall_back_rate_is_recorded_and_a_fall_back_scores_as_the_uniform_layout(result):
    """Each foveated row (foveate, query-blind) says whether the uniform floor answered; where it did, its tokens are
    the uniform layout's, so every metric equals the uniform row's.  The summary's rate is the records' mean, and the
    table shows it for the foveated rows only."""
    from foveate.eval.report import summary_rows

    cfg = result.config
    for rec in result.records:
        ms = rec["methods"]
        for name in cfg.methods:
            assert ("fell_back" in ms[name]) == (name in ("foveate", "query_blind")), name
        for name in ("foveate", "query_blind"):
            if ms[name]["fell_back"]:
                assert {k: ms[name][k] for k in ("coverage", "legible_coverage", "hit", "tokens")} == {
                    k: ms["uniform"][k] for k in ("coverage", "legible_coverage", "hit", "tokens")
                }
    s = aggregate(result.records, cfg.methods)
    for budget, groups in s.items():
        recs = [r for r in result.records if str(r["budget"]) == budget]
        assert groups["all"]["foveate"]["fell_back"] == pytest.approx(
            sum(r["methods"]["foveate"]["fell_back"] for r in recs) / len(recs)
        )
        assert "fell_back" not in groups["all"]["uniform"]
    header, rows = summary_rows(result)
    col = header.index("fall-back %")
    by_method = {(r[0], r[1]): r[col] for r in rows}
    assert by_method[("64", "uniform")] == "-"
    assert by_method[("64", "foveate")] == f"{100 * s['64']['all']['foveate']['fell_back']:.1f}"
