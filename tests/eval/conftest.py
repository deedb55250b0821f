"""One generated evaluation set and one run on it, shared by the evaluation tests (OCR made unavailable)."""

from __future__ import annotations

import sys

import pytest

from foveate.eval.runner import EvalConfig, run_eval

from .common import FAST, make_eval_set


@pytest.fixture(scope="package", autouse=True)
def _default_weights_loaded():
    """The package's weights hold a ranker from ``foveate.query.text``, which tests block to make OCR unavailable:
    load them first (they are cached), so that a test run alone behaves as in the whole suite."""
    from foveate.weights import load_weights

    load_weights("default")


@pytest.fixture(scope="package")
def eval_set(tmp_path_factory):
    root = tmp_path_factory.mktemp("evalset")
    info = make_eval_set(root)
    return root, info


@pytest.fixture(scope="package")
def result(eval_set):
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(sys.modules, "foveate.query.text", None)  # OCR unavailable, whatever is installed
        return run_eval(eval_set[0], EvalConfig(budgets=(64, 144), encode=FAST, random_seeds=3))
