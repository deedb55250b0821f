"""``foveate eval --vlm``: tokens per rule, and the OCR answer check on the pictures as the model sees them."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from foveate.eval.data import EvalQuery
from foveate.eval.report import render_markdown
from foveate.eval.runner import EvalConfig, run_eval
from foveate.eval.vlm import aggregate_vlm, picture_lines
from foveate.vlm import Picture

from .common import FAST


class FakeLine:
    def __init__(self, text, box):
        self.text, self.box = text, box


def test_picture_lines_maps_offsets_reads_only_near_the_answer_and_lets_finer_pictures_win():
    rgb = np.zeros((400, 600, 3), np.uint8)
    q = EvalQuery(1, "x.png", "q", np.array([[310.0, 110.0, 390.0, 130.0]]), answers=[("42", (310, 110, 390, 130))])
    context = Picture("context", (0, 0, 600, 400), (150, 100), (150, 100), 85, "low")
    crop = Picture("crop", (300, 100, 400, 140), (100, 40), (100, 40), 85, "low")
    far = Picture("crop", (0, 300, 100, 400), (100, 100), (100, 100), 85, "low")
    reads = []

    def read(img):
        reads.append(img.shape)
        if img.shape[:2] == (40, 100):  # the crop: its own coordinates
            return [FakeLine("42", (10, 10, 90, 30))]
        return [FakeLine("4Z", (310, 110, 390, 130)), FakeLine("total", (100, 110, 200, 130))]

    lines = picture_lines(rgb, [context, far, crop], q, read)
    assert [(ln.text, ln.box) for ln in lines] == [("42", (310, 110, 390, 130)), ("total", (100, 110, 200, 130))]
    assert sorted(reads) == [(40, 100, 3), (400, 600, 3)]  # the far crop is never read
    whole = [FakeLine("42!", (310, 110, 390, 130))]
    image = Picture("image", (0, 0, 600, 400), (600, 400), (600, 400), 765, "high")
    assert [ln.text for ln in picture_lines(rgb, [image], q, read, whole)] == ["42!"]  # the encode's own OCR
    assert picture_lines(rgb, [crop], q, lambda img: None) is None


def test_a_composite_is_read_as_its_parts():
    """A composite picture (several crops in one picture) is read part by part, each where it sits in the source and
    as the model sees it -- not as the hull of its parts."""
    from foveate.vlm import Part

    rgb = np.zeros((400, 600, 3), np.uint8)
    q = EvalQuery(1, "x.png", "q", np.array([[310.0, 110.0, 390.0, 130.0]]), answers=[("42", (310, 110, 390, 130))])
    parts = (Part((300, 100, 400, 140), (0, 0), (100, 40)), Part((0, 300, 100, 400), (0, 44), (100, 100)))
    composite = Picture("composite", (0, 100, 400, 400), (100, 144), (50, 72), 280, "low", parts=parts)
    reads = []

    def read(img):
        reads.append(img.shape)
        return [FakeLine("42", (10, 10, 90, 30))]

    lines = picture_lines(rgb, [composite], q, read)
    assert reads == [(40, 100, 3)]  # only the part near the answer, at its source size
    assert [(ln.text, ln.box) for ln in lines] == [("42", (310, 110, 390, 130))]


def test_eval_with_vlm_rules(eval_set):
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(sys.modules, "foveate.query.text", None)  # OCR unavailable: tokens only
        res = run_eval(
            eval_set[0],
            EvalConfig(
                budgets=(64, 144),
                encode=FAST,
                random_seeds=2,
                baselines=(),
                vlm=("openai", "anthropic", "gemini"),
                models=("gemini-3-flash-preview",),
            ),
        )
    for r in res.records:
        for v in r["vlm"].values():
            assert v["plan"] <= v["image"] and v["uniform"] <= max(v["plan"], 85, 280)  # gemini-3's least: 280
            assert v["fallback"] or v["kept"] == 1.0
            assert "ocr" not in v
    agg = aggregate_vlm(res.records)
    assert set(agg) == {"64", "144"}
    assert set(agg["144"]) == {"openai", "anthropic", "gemini", "gemini-3-flash-preview"}
    assert 0 < agg["144"]["anthropic"]["token_share"] < 1
    assert "| 144 | anthropic |" in render_markdown(res)
    assert res.to_dict()["vlm"] == agg
    with pytest.raises(Exception, match="unknown VLM rule"):
        EvalConfig(vlm=("gpt-9",))
    with pytest.raises(Exception, match="known families"):
        EvalConfig(models=("gpt-9",))


@pytest.mark.slow
def test_vlm_ocr_check_with_real_ocr(eval_set):
    res = run_eval(
        eval_set[0],
        EvalConfig(budgets=(144,), encode=FAST, baselines=(), vlm=("anthropic",), ocr="on", mosaic_ocr=False),
    )
    o = aggregate_vlm(res.records)["144"]["anthropic"]["ocr"]
    assert o["image"]["n"] == 10
    assert o["plan"]["fuzzy"] >= o["image"]["fuzzy"] - 0.1  # the crops keep the answers' scale
    assert all("foveate" not in r.get("ocr", {}) for r in res.records)  # --no-mosaic-ocr
