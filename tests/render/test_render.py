"""Outputs: overlay, mosaic, crops, tokens file, selection.json."""

from __future__ import annotations

import json

import numpy as np
import pytest
from safetensors.torch import load_file

from foveate import encode, select
from foveate.render import merge_boxes, plan_crops, render_mosaic, render_overlay, vlm_tokens, write_outputs

from ..conftest import random_image


def test_mosaic_at_full_budget_is_the_image():
    img = random_image(40, 56)
    tex = encode(img, preset="fast", device="cpu")
    sel = select(tex, None, 10_000)
    np.testing.assert_array_equal(render_mosaic(tex, sel), img)


def test_mosaic_of_coarse_tokens_is_blurred_but_close(photo_texture):
    sel = select(photo_texture, None, 16)
    m = render_mosaic(photo_texture, sel)
    img = photo_texture.image
    assert m.shape == img.shape
    err = np.abs(m.astype(float) - img).mean()
    assert 2 < err < 40  # coarse, not garbage


def test_overlay_shape_and_outlines(page_texture):
    sel = select(page_texture, {"boxes": [(560, 450, 790, 550)]}, 64)
    ov = render_overlay(page_texture.image, sel)
    assert ov.shape == page_texture.image.shape and ov.dtype == np.uint8
    assert not np.array_equal(ov, page_texture.image)


def test_merge_boxes_covers_and_respects_the_cap():
    rng = np.random.default_rng(0)
    xy = rng.integers(0, 900, (60, 2))
    boxes = np.concatenate([xy, xy + 16], 1)
    for cap in (1, 2, 4, 10):
        out = merge_boxes(boxes, cap)
        assert 1 <= len(out) <= cap
        for b in boxes:  # every input box lies inside some output rectangle
            assert ((out[:, 0] <= b[0]) & (out[:, 1] <= b[1]) & (out[:, 2] >= b[2]) & (out[:, 3] >= b[3])).any()
    touching = np.array([[0, 0, 16, 16], [16, 0, 32, 16], [100, 100, 116, 116]])
    assert len(merge_boxes(touching, 10)) == 2
    assert len(merge_boxes(np.zeros((0, 4)), 4)) == 0


def test_crop_plan_counts_tokens(page_texture):
    sel = select(page_texture, {"boxes": [(560, 450, 790, 550)]}, 273)
    plan = plan_crops(sel, max_crops=3, vlm_patch=14)
    assert 1 <= len(plan.crops) <= 3
    for c in plan.crops:
        assert c.tokens == vlm_tokens(c.width, c.height, 14)
    assert plan.thumbnail.width <= 448 and plan.thumbnail.height <= 448
    assert plan.full_image_tokens == vlm_tokens(850, 1100, 14)
    assert plan.total_tokens < plan.full_image_tokens
    assert vlm_tokens(28, 29, 14) == 6


def test_write_outputs(tmp_path, page_texture):
    sel = select(page_texture, "total", 100)
    written = write_outputs(page_texture, sel, tmp_path / "o")
    for name in ("selection", "overlay", "mosaic", "tokens", "crops"):
        assert written[name].exists()
    doc = json.loads(written["selection"].read_text())
    assert doc["num_tokens"] == len(sel) and "crops" in doc
    t = load_file(str(written["tokens"]))
    assert tuple(t["patches"].shape) == (len(sel), 3, 16, 16)
    assert t["boxes"].shape == (len(sel), 4) and t["centers"].shape == (len(sel), 2)
    crops = json.loads((written["crops"] / "crops.json").read_text())
    assert len(list(written["crops"].glob("crop_*.png"))) == len(crops["crops"])
    assert (written["crops"] / "thumbnail.png").exists()
    no_cut = select(page_texture, "total", 100, cut=False)
    with pytest.raises(ValueError, match="cut=True"):
        write_outputs(page_texture, no_cut, tmp_path / "o2")
