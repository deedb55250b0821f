"""Outputs: overlay, mosaic, crops, tokens file, selection.json."""

from __future__ import annotations

import json

import numpy as np
import pytest
from safetensors.torch import load_file

from foveate import encode, select
from foveate.render import crop_images, plan_crops, render_mosaic, render_overlay, write_outputs

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


def test_crop_plan_follows_the_rule(page_texture):
    sel = select(page_texture, {"boxes": [(560, 450, 790, 550)]}, 273)
    for rule in ("openai", "anthropic", "patch:14"):
        plan = plan_crops(sel, rule, max_crops=3)
        assert 1 <= len(plan.pictures) <= 4 and plan.tokens < plan.image.tokens
        assert plan.rule == rule
    assert plan_crops(sel, "patch:14").image.tokens == 61 * 79  # ceil(850/14) * ceil(1100/14)
    pics = crop_images(page_texture.image, plan_crops(sel, "anthropic"))
    assert pics[0][0] == "00-context.png"
    assert all(arr.dtype == np.uint8 and arr.ndim == 3 for _, arr in pics)


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
    assert crops["rule"] == "openai" and crops["plan_tokens"] <= crops["image_tokens"]
    names = sorted(p.name for p in written["crops"].glob("*.png"))
    assert names == [f"{i:02d}-{p['kind']}.png" for i, p in enumerate(crops["pictures"])]
    write_outputs(page_texture, sel, tmp_path / "o", vlm="llava-1.5")  # an earlier plan's pictures are replaced
    assert sorted(p.name for p in written["crops"].glob("*.png")) == ["00-image.png"]
    no_cut = select(page_texture, "total", 100, cut=False)
    with pytest.raises(ValueError, match="cut=True"):
        write_outputs(page_texture, no_cut, tmp_path / "o2")
