"""``foveate train``'s bad inputs are typed errors, and those that can be known before the data are read and encoded
(budgets, the output path, a preset without OCR) are raised before any work."""

from __future__ import annotations

import json

import numpy as np
import pytest

from foveate.core.config import EncodeConfig
from foveate.core.errors import BudgetError, ConfigError, DatasetError, FoveateError
from foveate.synth import make_dataset
from foveate.train import TrainConfig, train
from foveate.train.data import Page, Sample, load_pages
from foveate.train.ranker import fit_ranker
from foveate.weights import Weights


@pytest.mark.parametrize("budgets", [(0,), (64, 0), (-5,), (), (1.5,)])
def test_a_budget_select_would_refuse_is_refused_by_the_config(tmp_path, budgets):
    with pytest.raises(BudgetError):
        TrainConfig(("synth:3",), tmp_path / "w.safetensors", budgets=budgets)
    assert TrainConfig(("synth:3",), tmp_path / "w.safetensors", budgets=(np.int64(64), 1)).budgets == (64, 1)


def _unwritable(tmp_path):
    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_text("x")
    return {
        "an existing folder": tmp_path / "folder",
        "below a file": tmp_path / "file" / "w.safetensors",
        "deeper below a file": tmp_path / "file" / "sub" / "w.safetensors",
        "below /dev/null": "/dev/null/x.safetensors",
        "a device": "/dev/null",
    }


@pytest.mark.parametrize(
    "case", ["an existing folder", "below a file", "deeper below a file", "below /dev/null", "a device"]
)
def test_an_output_that_cannot_be_written_is_refused_before_any_work(tmp_path, case):
    out = _unwritable(tmp_path)[case]
    missing = tmp_path / "no-such-set"  # read only after the output is checked (else: a DatasetError)
    with pytest.raises(ConfigError, match="output"):
        train(TrainConfig((str(missing),), out, cache=tmp_path / "cache"), log=lambda m: None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "folder"]  # no cache, no .tmp


def test_a_failed_write_leaves_no_partial_file(tmp_path):
    from foveate.train.run import save_weights

    target = tmp_path / "w.safetensors"
    target.mkdir()  # became a folder after the output was checked: the rename fails
    with pytest.raises(FoveateError, match="could not write"):
        save_weights(Weights.handset(), target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.safetensors"]
    assert save_weights(Weights.handset(), tmp_path / "ok.safetensors").is_file()


def test_a_preset_without_ocr_is_refused_before_any_work(tmp_path):
    with pytest.raises(ConfigError, match="no text group"):
        train(
            TrainConfig((str(tmp_path / "no-such-set"),), tmp_path / "w.safetensors", preset="fast"),
            log=lambda m: None,
        )
    with pytest.raises(ConfigError, match="unknown preset"):
        train(
            TrainConfig((str(tmp_path / "no-such-set"),), tmp_path / "w.safetensors", preset="nope"),
            log=lambda m: None,
        )
    assert list(tmp_path.iterdir()) == []


def _pages_without_ocr(n: int) -> list[Page]:
    from foveate.core.texture import encode_array

    rng = np.random.default_rng(0)
    tex = encode_array(rng.integers(0, 255, (64, 96, 3), dtype=np.uint8), EncodeConfig(preset="fast"))
    sample = Sample("What is the total?", np.array([[4.0, 4.0, 40.0, 20.0]]), None)
    return [Page("set", f"{i}.png", "train", tex, [sample]) for i in range(n)]


def test_no_answer_on_an_ocr_line_is_a_dataset_error_that_says_what_to_do():
    pages = _pages_without_ocr(4)
    with pytest.raises(DatasetError, match="nothing to train the answer ranker on"):  # was a ValueError
        fit_ranker(pages, max_epochs=1, log=lambda m: None)
    from foveate.train.ranker import check_rankable  # what train asks before it fits (or forks) any ranker

    with pytest.raises(DatasetError, match="nothing to train the answer ranker on.*give more training images"):
        check_rankable(pages, seed=0)


def test_hostile_lines_in_a_training_set_are_skipped_lines(tmp_path):
    """The same parser as ``foveate eval``: a line nested 100k deep or with a 5,000-digit number is a skipped line,
    not a RecursionError or a ValueError."""
    folder = tmp_path / "set"
    folder.mkdir()
    lines = [
        "[" * 100_000 + "]" * 100_000,
        '{"image": "a.png", "query": "q", "boxes": [[0, 0, 10, ' + "9" * 5000 + "]]}",
        json.dumps({"image": "missing.png", "query": "q", "boxes": [[0, 0, 10, 10]]}),
    ]
    (folder / "queries.jsonl").write_bytes(b"\xef\xbb\xbf" + "\n".join(lines).encode() + b"\n")
    with pytest.raises(DatasetError, match="no usable question"):
        load_pages([folder], tmp_path / "cache", EncodeConfig(preset="fast"), 0)


@pytest.mark.slow
def test_a_training_split_with_no_answer_on_an_ocr_line_is_refused_before_the_ranker(tmp_path):
    """Real OCR: every answer box moved to a blank corner of its page; the run stops with a DatasetError before a
    ranker is fitted (and no file is written)."""
    data = make_dataset(tmp_path / "blank", 6, kinds=("receipt",), seed=3)
    rows = [json.loads(x) for x in (data / "queries.jsonl").read_text().splitlines()]
    rows = [{**r, "boxes": [[1, 1, 6, 6]], "text_heights": None} for r in rows]
    (data / "queries.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    said: list[str] = []
    with pytest.raises(DatasetError, match="nothing to train the answer ranker on"):
        train(TrainConfig((str(data),), tmp_path / "w.safetensors", cache=tmp_path / "c", workers=1), log=said.append)
    assert not any("epoch" in m for m in said) and not (tmp_path / "w.safetensors").exists()
