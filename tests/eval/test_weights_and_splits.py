"""Evaluating with other weights, on one split, and answers printed in several places."""

from __future__ import annotations

import json

import numpy as np
import pytest

from foveate.core.errors import ConfigError
from foveate.eval.data import split_of
from foveate.eval.metrics import query_metrics
from foveate.eval.runner import EvalConfig, run_eval

from .common import FAST, make_eval_set


def test_any_box_is_enough_for_a_repeated_answer():
    tokens = np.array([[0, 0, 100, 100]], float)  # one sharp token over the first copy only
    gt = [[10, 10, 60, 30], [300, 300, 350, 320]]
    both = query_metrics(tokens, np.array([0]), gt, (400, 400), [12, 12])
    anyb = query_metrics(tokens, np.array([0]), gt, (400, 400), [12, 12], any_box=True)
    assert not both.hit and anyb.hit and anyb.legible_coverage == 1.0 and len(anyb.per_box) == 2


def test_split_is_by_image_and_stable():
    images = [f"images/{i}.png" for i in range(400)]
    splits = [split_of("set", im, 0) for im in images]
    share = {s: splits.count(s) / len(splits) for s in ("train", "val", "test")}
    assert 0.5 < share["train"] < 0.7 and 0.12 < share["val"] < 0.28 and 0.12 < share["test"] < 0.28
    assert splits == [split_of("set", im, 0) for im in images]  # a function of (seed, set, image) only
    assert splits != [split_of("set", im, 1) for im in images]


def test_rows_for_compared_weights_and_one_split(tmp_path):
    root = tmp_path / "set"
    make_eval_set(root, bad_lines=False)
    res = run_eval(
        root, EvalConfig(budgets=(144,), encode=FAST, baselines=("uniform",), ocr="off", compare_weights=("handset",))
    )
    assert res.config.methods == ["foveate", "foveate:handset", "uniform"]
    assert all(set(r["methods"]) == {"foveate", "foveate:handset", "uniform"} for r in res.records)
    lines = [json.loads(x) for x in (root / "queries.jsonl").read_text().splitlines() if x]
    for split in ("train", "val", "test"):
        want = sum(split_of("set", x["image"], 5) == split for x in lines)
        if want:
            got = run_eval(
                root, EvalConfig(budgets=(144,), encode=FAST, baselines=(), ocr="off", split=split, split_seed=5)
            )
            assert got.counts["queries"] == want
    with pytest.raises(ConfigError, match="split"):
        EvalConfig(split="dev")
    with pytest.raises(ConfigError, match="distinct"):
        EvalConfig(compare_weights=("handset", "handset"))
