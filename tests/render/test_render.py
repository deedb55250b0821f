"""Outputs: overlay, mosaic, crops, tokens file, selection.json."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest
from PIL import Image
from safetensors.torch import load_file

from foveate import encode, select
from foveate.core.errors import ConfigError
from foveate.render import crop_images, plan_crops, render_mosaic, render_overlay, save, write_outputs

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
    h, w = page_texture.image.shape[:2]
    assert ov.shape[0] > h and ov.shape[1:] == (w, 3) and ov.dtype == np.uint8  # the legend bar under the page
    assert not np.array_equal(ov[:h], page_texture.image)
    assert render_overlay(page_texture.image, sel, legend=False).shape == page_texture.image.shape


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


def test_save_writes_pictures_at_the_size_they_are_looked_at(tmp_path, page_texture):
    sel = select(page_texture, "total", 100)
    written = save(page_texture, sel, tmp_path / "o", max_side=400, image_format="webp")
    doc = json.loads(written["selection"].read_text())
    ov, mo = Image.open(written["overlay"]), Image.open(written["mosaic"])
    assert written["overlay"].name == "overlay.webp" and ov.format == "WEBP"
    assert ov.size[0] == 309 and ov.size[1] > 400  # 850 x 1100 shown at 309 x 400, the legend bar under it
    finest = min(v.scale for p in plan_crops(sel, "openai").pictures for v in p.views())
    assert max(mo.size) <= min(400, round(1100 / max(finest, 1.0)))  # no sharper than the plan sends
    assert doc["pictures"] == {"overlay": list(ov.size), "mosaic": list(mo.size)}
    on_disk = {str(p.relative_to(tmp_path / "o")): p.stat().st_size for p in (tmp_path / "o").rglob("*") if p.is_file()}
    assert doc["files"] == {k: v for k, v in on_disk.items() if k != "selection.json"}
    again = save(page_texture, sel, tmp_path / "o", image_format="jpeg", crops=False, tokens=False)
    assert sorted(p.name for p in (tmp_path / "o").glob("overlay.*")) == ["overlay.jpg"]  # the webp is gone
    assert Image.open(again["mosaic"]).format == "JPEG"
    full = save(page_texture, sel, tmp_path / "f", max_side=None, crops=False, tokens=False, heat=False)
    assert Image.open(full["mosaic"]).size == (850, 1100)
    for bad in ({"image_format": "gif"}, {"max_side": 10}):
        with pytest.raises(ConfigError):
            save(page_texture, sel, tmp_path / "b", **bad)


def _receipt_photo(h: int = 4032, w: int = 3024) -> np.ndarray:
    """A phone photo of a receipt, generated: a white slip with lines of print on a dark, grainy table."""
    rng = np.random.default_rng(0)
    ramp = np.linspace(40, 90, w, dtype=np.float32)[None, :, None] * np.array([1.0, 0.7, 0.5], np.float32)
    img = np.broadcast_to(ramp, (h, w, 3)) + rng.normal(0, 3, (h // 8, w // 8, 1)).repeat(8, 0).repeat(8, 1)
    img = np.clip(img, 0, 255).astype(np.uint8)
    cv2.rectangle(img, (w // 6, h // 20), (5 * w // 6, 19 * h // 20), (236, 234, 228), -1)
    for i, y in enumerate(range(h // 10, 9 * h // 10, h // 40)):
        text = f"ITEM {i:02d}  GIFT CARD NO. 6108{i * 7919 % 10000:04d}   ${i * 3.25:7.2f}"
        cv2.putText(img, text, (w // 5, y), cv2.FONT_HERSHEY_SIMPLEX, 2.2, (30, 30, 30), 5, cv2.LINE_AA)
    return cv2.GaussianBlur(img, (0, 0), 1.2)


@pytest.mark.slow
def test_a_receipt_photo_writes_under_2_mb(tmp_path):
    """A 3024 x 4032 receipt photo writes, by default, under 2 MB in all (issue 43: 9.5 MB of overlay and 5 MB of
    mosaic before): the overlay and mosaic at 1,024 px at most, not 12 MP each."""
    tex = encode(_receipt_photo(), preset="fast", device="cpu")
    sel = select(tex, {"boxes": [(1600, 1800, 2400, 1950)]}, 273)
    written = save(tex, sel, tmp_path / "o")
    doc = json.loads(written["selection"].read_text())
    total = sum(p.stat().st_size for p in (tmp_path / "o").rglob("*") if p.is_file())
    assert total < 2 * 2**20, doc["files"]
    assert max(doc["pictures"]["mosaic"]) <= 1024 and doc["pictures"]["overlay"][0] == 768
    full = save(tex, sel, tmp_path / "full", max_side=None, mosaic=False, crops=False, tokens=False)
    assert full["overlay"].stat().st_size > 2 * 2**20  # what the cap saves
