"""The evaluation stage on small generated data sets (rendered pages with known boxes), never on shared data."""

from __future__ import annotations

import itertools
import json
import math
import sys
from collections import namedtuple
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from foveate.core.config import EncodeConfig, SelectConfig
from foveate.core.errors import ConfigError, DatasetError, FoveateError
from foveate.eval.runner import (
    EvalConfig,
    parse_select_value,
    parse_variant,
    run_eval,
)
from foveate.eval.baselines import (
    Tokens,
    random_tiles,
    uniform_scale,
    uniform_tokens,
)
from foveate.eval.summary import (
    aggregate,
)
from foveate.eval.answers import (
    answer_found,
    lines_at,
    normalize_text,
    query_answer_found,
    substring_edit_distance,
)
from foveate.eval.data import (
    check_boxes,
    parse_query_line,
    read_queries,
)
from foveate.eval.oracle import (
    oracle_tiles,
)
from foveate.eval.report import (
    render_markdown,
    write_outputs,
)
from foveate.eval.metrics import query_metrics
from foveate.core.ops import level_shapes
from foveate.synth import TextLine, render_page

FAST = EncodeConfig(preset="fast")

FIELDS = [("Invoice No", "NW-2026-0417"), ("Date", "March 14, 2026"), ("Total due", "$1,234.50"),
          ("Account", "4410 2291 0087"), ("Signed", "J. Alvarez")]


def make_eval_set(root: Path, bad_lines: bool = True) -> dict:
    """Two rendered forms (fields at known boxes) plus, optionally, every kind of broken line."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "images").mkdir(exist_ok=True)
    lines = []
    for k, (w, h) in enumerate([(480, 360), (400, 520)]):
        text = [TextLine(f"{key}:", 20, 30 + 60 * i, 16) for i, (key, _) in enumerate(FIELDS)]
        text += [TextLine(val, 200, 30 + 60 * i, 16 + 2 * k) for i, (_, val) in enumerate(FIELDS)]
        page = render_page(text, width=w, height=h, noise=2.0, seed=k)
        Image.fromarray(page.image).save(root / "images" / f"form{k}.png")
        for key, val in FIELDS:
            ln = page.find(val)
            lines.append({"image": f"images/form{k}.png", "query": f'What is the value of the field "{key}"?',
                          "boxes": [ln["box"]], "text_heights": [ln["box"][3] - ln["box"][1]],
                          "answer_text": [val], "type": "key_value", "page": k})
    raw = [json.dumps(d) for d in lines]
    expected = {}
    if bad_lines:
        (root / "images" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n not really")
        extra = [
            ("json", '{"image": "images/form0.png", "query": "x", "boxes": [[1, 2, 3'),
            ("schema", json.dumps({"image": "images/form0.png", "boxes": [[0, 0, 10, 10]]})),
            ("schema", json.dumps({"image": "images/form0.png", "query": "q", "boxes": [[0, 0, 10]]})),
            ("schema", json.dumps({"image": "images/form0.png", "query": "q", "boxes": [[0, 0, 10, 10]],
                                   "text_heights": [1, 2]})),
            ("image_missing", json.dumps({"image": "images/nope.png", "query": "q", "boxes": [[0, 0, 10, 10]]})),
            ("image_unreadable", json.dumps({"image": "images/broken.png", "query": "q", "boxes": [[0, 0, 9, 9]]})),
            ("no_boxes", json.dumps({"image": "images/form0.png", "query": "q", "boxes": [[900, 900, 950, 950]]})),
            ("box_clipped", json.dumps({"image": "images/form1.png", "query": "signature", "boxes":
                                        [[300, 480, 450, 560]]})),
            ("box_invalid", json.dumps({"image": "images/form1.png", "query": "total", "boxes":
                                        [[50, 50, 40, 60], [10, 10, 100, 40]]})),
        ]
        for kind, text in extra:
            raw.append(text)
            expected[len(raw)] = kind
        raw.insert(3, "")  # blank lines are ignored, and line numbers still count them
        expected = {(n + 1 if n > 3 else n): k for n, k in expected.items()}
    (root / "queries.jsonl").write_text("\n".join(raw) + "\n")
    return {"n_valid": len(lines), "expected": expected}


@pytest.fixture(scope="module")
def eval_set(tmp_path_factory):
    root = tmp_path_factory.mktemp("evalset")
    info = make_eval_set(root)
    return root, info


@pytest.fixture(scope="module")
def result(eval_set):
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(sys.modules, "foveate.query.text", None)  # OCR unavailable, whatever is installed
        return run_eval(eval_set[0], EvalConfig(budgets=(64, 144), encode=FAST, random_seeds=3))


# ----------------------------------------------------------------------------------------------------------
# Generalised metrics: per-token scales (hand-computed)


def test_scales_give_the_same_result_as_levels():
    rng = np.random.default_rng(1)
    for _ in range(20):
        xy = rng.integers(0, 200, (12, 2))
        toks = np.concatenate([xy, xy + rng.integers(8, 60, (12, 2))], 1)
        levels = rng.integers(0, 4, 12)
        gts = rng.integers(0, 200, (3, 2))
        gts = np.concatenate([gts, gts + rng.integers(4, 50, (3, 2))], 1)
        a = query_metrics(toks, levels, gts, (256, 256))
        b = query_metrics(toks, None, gts, (256, 256), token_scales=2.0 ** levels)
        assert (a.coverage, a.legible_coverage, a.hit) == (b.coverage, b.legible_coverage, b.hit)


def test_fractional_scale_legibility():
    box = [[10, 10, 60, 30]]  # 20 px tall
    tok = [[0, 0, 100, 100]]
    assert query_metrics(tok, None, box, (100, 100), token_scales=[2.5]).legible_coverage == 1.0  # 20/2.5 = 8
    assert query_metrics(tok, None, box, (100, 100), token_scales=[2.6]).legible_coverage == 0.0  # 7.7 px
    # text height, not box height, decides: a 3-line box of 10 px lines blurs at scale 1.3 (7.7 px)
    r = query_metrics(tok, None, [[0, 0, 50, 30]], (100, 100), [10], token_scales=[1.3])
    assert r.coverage == 1.0 and r.legible_coverage == 0.0 and not r.hit
    with pytest.raises(ValueError):
        query_metrics(tok, None, box, (100, 100))
    with pytest.raises(ValueError):
        query_metrics(tok, None, box, (100, 100), token_scales=[1, 2])


# ----------------------------------------------------------------------------------------------------------
# Baselines


def test_uniform_scale_hand_computed():
    # 100 x 50 image, 10 px tiles: full resolution is 10 x 5 = 50 tiles
    assert uniform_scale((50, 100), 10, 50) == 1.0
    assert uniform_scale((50, 100), 10, 500) == 1.0  # never upsampled
    # 12 tokens: s = 2 gives 5 x 3 = 15 (too many); the next breakpoint, s = 2.5, gives 4 x 2 = 8
    assert uniform_scale((50, 100), 10, 12) == pytest.approx(2.5)
    assert uniform_scale((50, 100), 10, 15) == pytest.approx(2.0)
    assert uniform_scale((50, 100), 10, 1) == pytest.approx(10.0)  # 1 x 1: the 100 px side in one 10 px token
    t = uniform_tokens((50, 100), 10, 12)
    assert len(t) == 8 and np.all(t.scales == 2.5)
    assert t.boxes.tolist()[:2] == [[0, 0, 25, 25], [25, 0, 50, 25]]
    assert t.boxes.tolist()[-1] == [75, 25, 100, 50]


@pytest.mark.parametrize("h,w,patch", [(360, 480, 16), (1000, 754, 16), (7, 300, 16), (640, 427, 14)])
def test_uniform_grid_tiles_the_image_within_budget(h, w, patch):
    for budget in (1, 2, 5, 64, 144, 273, 576, 5000):
        t = uniform_tokens((h, w), patch, budget)
        assert 1 <= len(t) <= budget
        area = ((t.boxes[:, 2] - t.boxes[:, 0]) * (t.boxes[:, 3] - t.boxes[:, 1])).sum()
        assert area == pytest.approx(h * w)  # disjoint and covering
        # a slightly finer grid would not fit: s is the smallest scale that does
        s = float(t.scales[0])
        if s > 1:
            finer = math.ceil(w / (s * 0.999 * patch)) * math.ceil(h / (s * 0.999 * patch))
            assert finer > budget


def test_random_tiles():
    shapes = level_shapes(23, 30, 5)  # a 480 x 360 page at P = 16: top level 2 x 2
    a = random_tiles(shapes, 64, True, np.random.default_rng(0))
    b = random_tiles(shapes, 64, True, np.random.default_rng(0))
    c = random_tiles(shapes, 64, True, np.random.default_rng(1))
    assert a == b and a != c
    assert len(a) == 64 and len(set(a)) == 64
    assert a[:4] == [(4, 0, 0), (4, 0, 1), (4, 1, 0), (4, 1, 1)]  # the gist
    assert all(t[0] == 0 for t in a[4:])
    assert all(t[0] == 0 for t in random_tiles(shapes, 64, False, np.random.default_rng(0)))
    assert len(random_tiles(shapes, 10_000, True, np.random.default_rng(0))) == 4 + 23 * 30


def test_oracle_is_never_over_budget_and_finds_boxes():
    rng = np.random.default_rng(3)
    shapes = level_shapes(63, 48, 5)  # 754 x 1000 at P = 16
    for mode, budget in itertools.product(("quadtree", "topk"), (12, 13, 40, 64, 273, 4000)):
        for _ in range(5):
            xy = rng.integers(0, 700, (4, 2))
            boxes = np.concatenate([xy, xy + rng.integers(5, 120, (4, 2))], 1).astype(float)
            heights = rng.uniform(4, 40, 4)
            cfg = SelectConfig(budget=budget, mode=mode)
            tiles = oracle_tiles(shapes, 16, boxes, heights, cfg)
            assert len(tiles) <= budget and len(set(tiles)) == len(tiles)
    # one 12 px line: legible at level 0 only; 64 tokens are enough to reach it
    box = np.array([[300.0, 400.0, 380.0, 412.0]])
    for mode in ("quadtree", "topk"):
        cfg = SelectConfig(budget=64, mode=mode)
        toks = Tokens.from_tiles(oracle_tiles(shapes, 16, box, None, cfg), (1000, 754), 16, shapes[0])
        m = query_metrics(toks.boxes, None, box, (1000, 754), token_scales=toks.scales)
        assert m.hit and m.legible_coverage == 1.0


# ----------------------------------------------------------------------------------------------------------
# Data: parsing and per-line problems


def test_parse_query_line():
    q = parse_query_line(json.dumps({"image": "a.png", "query": "q", "boxes": [[1, 2, 3, 4], [5, 6, 7, 8]],
                                     "answer_text": ["x", "y"], "extra": 1}), 7)
    assert q.line == 7 and q.boxes.shape == (2, 4) and q.meta == {"extra": 1}
    assert q.answers == [("x", (1, 2, 3, 4)), ("y", (5, 6, 7, 8))]
    q = parse_query_line(json.dumps({"image": "a.png", "query": "q", "boxes": [[1, 2, 3, 4], [5, 6, 7, 8]],
                                     "answer_text": "both"}), 1)
    assert q.answers == [("both", None)]  # not one per box: read at any box
    for bad in ['[1, 2]', '{"image": 3, "query": "q", "boxes": [[0,0,1,1]]}', '{"image": "a", "query": "q", "boxes": []}',
                '{"image": "a", "query": "q", "boxes": [[0, 0, "1", 1]]}', '{"image": "a", "query": "q", "boxes": [[0,0,1,1]],'
                ' "answer_text": [1]}', '{"image": "a", "query": "q", "boxes": [[0, 0, NaN, 1]]}']:
        with pytest.raises(Exception) as exc:
            parse_query_line(bad, 1)
        assert exc.value.kind in ("json", "schema")


def test_check_boxes_clips_and_drops():
    q = parse_query_line(json.dumps({"image": "a.png", "query": "q", "boxes": [[-5, 10, 20, 30], [50, 50, 40, 60],
                                     [200, 200, 300, 300], [10, 10, 20, 20]], "text_heights": [1, 2, 3, 4]}), 3)
    cq, probs = check_boxes(q, (100, 100))
    assert [p.kind for p in probs] == ["box_clipped", "box_invalid", "box_outside"]
    assert all(p.line == 3 and not p.skipped for p in probs)
    assert cq.boxes.tolist() == [[0, 10, 20, 30], [10, 10, 20, 20]] and cq.text_heights.tolist() == [1, 4]
    cq, probs = check_boxes(parse_query_line('{"image": "a", "query": "q", "boxes": [[200, 0, 300, 10]]}', 9), (100, 100))
    assert cq is None and probs[-1].kind == "no_boxes" and probs[-1].skipped


def test_every_broken_line_is_reported_with_its_number_and_the_run_goes_on(eval_set, result):
    root, info = eval_set
    got = {}
    for p in result.problems:
        got.setdefault(p.line, set()).add(p.kind)
    for line, kind in info["expected"].items():
        assert kind in got.get(line, set()), (line, kind, got)
    assert all(str(p).startswith(f"line {p.line}:") for p in result.problems)
    c = result.counts
    assert c["problem:json"] == 1 and c["problem:schema"] == 3 and c["problem:image_missing"] == 1
    assert c["problem:image_unreadable"] == 1 and c["problem:no_boxes"] == 1 and c["problem:box_outside"] == 1
    assert c["problem:box_clipped"] == 1 and c["problem:box_invalid"] == 1
    assert c["skipped_lines"] == 7
    # the valid queries, plus the clipped one and the one that kept a box, are evaluated at both budgets
    assert c["evaluated_queries"] == info["n_valid"] + 2
    assert c["records"] == 2 * c["evaluated_queries"]
    md = render_markdown(result)
    assert "7 of 19 lines skipped" in md


def test_missing_folder_or_file_is_a_dataset_error(tmp_path):
    with pytest.raises(DatasetError, match="not a folder"):
        read_queries(tmp_path / "nope")
    with pytest.raises(DatasetError, match="no queries.jsonl"):
        read_queries(tmp_path)


# ----------------------------------------------------------------------------------------------------------
# The runner


def test_each_image_is_encoded_once(tmp_path, monkeypatch):
    import foveate.core.texture

    make_eval_set(tmp_path, bad_lines=False)
    calls = []
    real = foveate.core.texture.encode_array
    monkeypatch.setattr(foveate.core.texture, "encode_array", lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setitem(sys.modules, "foveate.query.text", None)
    r = run_eval(tmp_path, EvalConfig(budgets=(64, 144, 273), encode=FAST, random_seeds=2,
                                      variants=(("topk", SelectConfig(mode="topk")),)))
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
    r = run_eval(root, EvalConfig(budgets=(3, 64), encode=FAST, random_seeds=1))
    assert r.counts["problem:budget"] > 0
    assert {rec["budget"] for rec in r.records} == {64}
    assert all("budget 3" in p.message for p in r.problems if p.kind == "budget")


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


# ----------------------------------------------------------------------------------------------------------
# OCR answer check: the matching rule, and the unavailable path


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


OcrLine = namedtuple("OcrLine", "text box score")


def test_lines_at_reads_only_at_the_box_in_reading_order():
    lines = [OcrLine("Narko", (160, 286, 234, 304), 0.9), OcrLine("Kevin", (100, 287, 150, 303), 0.9),
             OcrLine("Narko", (160, 500, 234, 518), 0.9), OcrLine("second line", (100, 310, 200, 326), 0.9)]
    assert lines_at(lines, [(100, 286, 234, 304)]) == "Kevin Narko"
    assert lines_at(lines, [(100, 286, 234, 326)]) == "Kevin Narko second line"
    assert lines_at(lines, [(400, 0, 500, 20)]) == ""
    q = parse_query_line(json.dumps({"image": "a", "query": "q", "boxes": [[100, 286, 234, 304], [160, 500, 234, 518]],
                                     "answer_text": ["Kevin Narko", "Narko"]}), 1)
    assert query_answer_found(q, lines) == {"exact": True, "fuzzy": True}
    q2 = parse_query_line(json.dumps({"image": "a", "query": "q", "boxes": [[160, 500, 234, 518]],
                                      "answer_text": ["Kevin Narko"]}), 1)
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


# ----------------------------------------------------------------------------------------------------------
# Configuration and outputs


def test_parse_select_values_and_variants():
    assert parse_select_value("topk_levels", "4,3,2,1,0") == (4, 3, 2, 1, 0)
    assert parse_select_value("topk_candidates", "500,none") == (500, None)
    assert parse_select_value("topk_candidates", "default") is None
    assert parse_select_value("gist", "false") is False
    name, cfg = parse_variant("cascade5:mode=topk:topk_levels=4,3,2,1,0:topk_candidates=500,500,500,none",
                              SelectConfig())
    assert name == "cascade5" and cfg.mode == "topk" and cfg.topk_levels == (4, 3, 2, 1, 0)
    for bad in ("x:budget=3", ":mode=topk", "x:mode", "x:gist=maybe", "x:topk_levels=4,2"):
        with pytest.raises(ConfigError):
            parse_variant(bad, SelectConfig())
    with pytest.raises(ConfigError):
        EvalConfig(baselines=("uniform", "psychic"))
    with pytest.raises(ConfigError):
        EvalConfig(variants=(("a", SelectConfig()), ("a", SelectConfig())))


def test_write_outputs_json_markdown_and_plots(result, tmp_path):
    pytest.importorskip("matplotlib")
    written = write_outputs(result, tmp_path / "o", plots=True, gallery=4, group_by=["page"])
    doc = json.loads(written["json"].read_text())
    assert len(doc["records"]) == result.counts["records"] and doc["counts"] == result.counts
    assert set(doc["summary"]) == {"64", "144"} and "by_page" in doc
    assert doc["problems"][0]["line"] is not None
    md = written["markdown"].read_text()
    assert md.count("| 64 | ") >= 6 and "by `page`" in md
    for name in ("curves", "gallery"):
        im = Image.open(written[name])
        assert im.size[0] > 300 and im.size[1] > 200


def test_plots_without_matplotlib_say_what_to_install(monkeypatch):
    from foveate.eval.plots import load_pyplot

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(FoveateError, match=r"foveate\[plots\]"):
        load_pyplot()


# ----------------------------------------------------------------------------------------------------------
# The command


def test_cli_eval(eval_set, tmp_path):
    from .test_cli import run

    root, _ = eval_set
    r = run("eval", root, "-b", "64,144", "--preset", "fast", "--random-seeds", "2", "--markdown", "--group-by", "page",
            "--variant", "topk:mode=topk", "-o", tmp_path / "o", "--ocr", "off")
    assert r.returncode == 0, r.stderr
    assert "| 144 | foveate:topk |" in r.stdout and "line 1" not in r.stderr
    assert "problems (" in r.stdout and "7 of 19 lines skipped" in r.stdout
    doc = json.loads((tmp_path / "o" / "eval.json").read_text())
    assert doc["counts"]["encodes"] == 2 and doc["ocr"]["status"] == "off"
    assert {p["kind"] for p in doc["problems"]} >= {"json", "schema", "image_missing", "no_boxes"}


@pytest.mark.parametrize("setup,args,needle", [
    (lambda d: None, ("eval", "missing"), "not a folder"),
    (lambda d: (d / "empty").mkdir(), ("eval", "empty"), "no queries.jsonl"),
    (lambda d: (d / "bad").mkdir() or (d / "bad" / "queries.jsonl").write_text("nope\n"), ("eval", "bad"),
     "nothing to evaluate"),
    (lambda d: None, ("eval", ".", "-b", "0"), "budget"),
    (lambda d: None, ("eval", ".", "--baselines", "psychic"), "unknown baseline"),
    (lambda d: None, ("eval", ".", "--variant", "x:budget=4"), "unknown selection setting"),
])
def test_cli_eval_errors(tmp_path, setup, args, needle):
    from .test_cli import run

    setup(tmp_path)
    r = run(*args, cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert needle in r.stderr and "Traceback" not in r.stderr
