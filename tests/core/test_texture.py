"""The texture: shapes for any size, presets and the registry, mips, attach, save/load."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import foveate
from foveate import ConfigError, EncodeConfig, Texture, TextureFormatError, encode
from foveate.channels.registry import PRESETS, list_groups
from foveate.core import ops

from ..conftest import random_image


@pytest.mark.parametrize(
    "hw,levels",
    [
        ((1024, 1024), 5),
        ((480, 640), 5),
        ((37, 53), 3),
        ((1, 1), 1),
        ((10, 10000), 5),
        ((10000, 10), 5),
        ((16, 16), 1),
        ((17, 16), 2),
    ],
)
def test_grid_shapes_for_any_size(hw, levels):
    h, w = hw
    tex = encode(random_image(h, w), preset="fast", device="cpu")
    gh, gw = -(-h // 16), -(-w // 16)
    assert tex.level_shapes[0] == (gh, gw)
    assert tex.num_levels == levels
    for lvl, (a, b) in enumerate(tex.level_shapes):
        assert tex.mean[lvl].shape == (a, b, len(tex.channels)) == tex.max[lvl].shape
        assert tex.coverage[lvl].shape == (a, b)
        if lvl:
            pa, pb = tex.level_shapes[lvl - 1]
            assert (a, b) == (-(-pa // 2), -(-pb // 2))
        assert bool(torch.isfinite(tex.mean[lvl].float()).all())
    assert tex.mean[0].dtype == torch.float16 and tex.mean[0].is_contiguous()  # channels-last storage


def test_presets_and_full_layout(photo_texture, photo):
    assert set(PRESETS) >= {"fast", "default", "full"}
    fast = encode(photo, preset="fast", device="cpu")
    default = encode(photo, preset="default", device="cpu")
    assert set(fast.groups) < set(default.groups) <= set(photo_texture.groups)
    assert {"clusters", "boundaries"} <= set(default.groups) - set(fast.groups)
    full = photo_texture
    assert len(full.channels) == 41  # DESIGN.md's 40, with text_density beside the text mask (channel 39)
    expect = {
        "rgb": (0, 3),
        "edges": (3, 5),
        "frequency": (5, 7),
        "motion": (7, 8),
        "saliency": (8, 9),
        "position": (9, 12),
        "clusters": (12, 15),
        "temporal": (15, 18),
        "semantic": (18, 34),
        "distance": (34, 35),
        "attention": (35, 38),
        "boundaries": (38, 39),
        "text": (39, 41),
    }
    assert full.channels[39:] == ("text", "text_density")
    for name, sl in expect.items():
        assert full.groups[name] == sl, name
    assert {"semantic", "attention", "temporal"} <= set(full.absent)
    for g in full.absent:
        a, b = full.groups[g]
        assert float(full.mean[0][..., a:b].abs().max()) == 0.0  # absent groups are zeros, and reported
    assert full.channel("motion").max() == 0.0  # a still image does not move


def test_unknown_preset_and_group():
    with pytest.raises(ConfigError, match="unknown preset 'nope'"):
        encode(random_image(32, 32), preset="nope")
    with pytest.raises(ConfigError, match="unknown channel group"):
        encode(random_image(32, 32), groups=("rgb", "xray"))
    with pytest.raises(ConfigError, match="patch_size"):
        EncodeConfig(patch_size=0)


def test_groups_override_keeps_layout_order():
    tex = encode(random_image(64, 64), groups=("saliency", "rgb"), device="cpu")
    assert tex.channels == ("r", "g", "b", "saliency")


def test_channel_values_follow_the_image():
    img = np.full((64, 128, 3), 255, np.uint8)
    img[:, 64:] = (255, 0, 0)
    tex = encode(img, preset="fast", device="cpu")
    r, g = tex.channel("r"), tex.channel("g")
    assert (
        np.allclose(r, 1.0, atol=1e-3) and np.allclose(g[:, :3], 1.0, atol=1e-3) and np.allclose(g[:, 5:], 0, atol=1e-3)
    )
    x, y = tex.channel("x"), tex.channel("y")
    assert x[0, 0] == pytest.approx(8 / 128, abs=1e-3) and y[-1, 0] == pytest.approx(56 / 64, abs=1e-3)
    ecc = tex.channel("eccentricity")
    assert ecc[0, 0] > ecc[1, 3]


def test_max_mip_keeps_a_small_bright_detail():
    img = np.full((512, 512, 3), 128, np.uint8)
    img[300:310, 40:50] = 255
    tex = encode(img, preset="fast", device="cpu")
    i = tex.channel_index("edges_dark")
    j = tex.channel_index("edges_light")
    top = tex.num_levels - 1
    r, c = 300 // (16 << top), 40 // (16 << top)
    mx = float(tex.max[top][r, c, j])
    mean = float(tex.mean[top][r, c, j])
    assert mx > 4 * mean > 0
    assert float(tex.max[top][..., i].max()) <= mx + 1e-3


def test_encode_is_deterministic(photo):
    a = encode(photo, device="cpu")
    b = encode(photo.copy(), device="cpu")
    for x, y in zip(a.mean + a.max, b.mean + b.max):
        assert torch.equal(x, y)
    assert a.content_hash == b.content_hash and a.id == b.id


def test_content_hash_ignores_file_format(tmp_path, photo):
    import cv2

    cv2.imwrite(str(tmp_path / "a.png"), photo[..., ::-1])
    cv2.imwrite(str(tmp_path / "a.bmp"), photo[..., ::-1])
    assert (
        encode(tmp_path / "a.png", preset="fast").content_hash == encode(tmp_path / "a.bmp", preset="fast").content_hash
    )


def test_config_hash():
    a = EncodeConfig()
    assert a.hash() == EncodeConfig().hash()
    assert a.hash() != EncodeConfig(patch_size=14).hash() != EncodeConfig(preset="fast").hash()
    assert a.hash() == EncodeConfig(max_pixels=5).hash()  # a guard, not a parameter of the result
    assert EncodeConfig.from_dict(a.to_dict()) == a


def test_feature_memory_budget():
    tex = encode(random_image(1024, 1024), preset="full", device="cpu")
    assert tex.feature_bytes() <= 1_000_000  # all levels, mean + max, 40 channels, float16


def test_save_load_round_trip(tmp_path, photo_texture):
    path = photo_texture.save(tmp_path / "photo.fvt")
    loaded = Texture.load(path)
    assert loaded.channels == photo_texture.channels and loaded.groups == photo_texture.groups
    assert loaded.absent == photo_texture.absent and loaded.id == photo_texture.id
    for x, y in zip(
        loaded.mean + loaded.max + loaded.coverage, photo_texture.mean + photo_texture.max + photo_texture.coverage
    ):
        assert torch.equal(x, y)
    np.testing.assert_array_equal(loaded.image, photo_texture.image)
    assert set(loaded.tensors) == set(photo_texture.tensors)
    assert not list(tmp_path.glob(".*tmp"))  # the atomic write left no temporary file
    assert Texture.from_bytes(photo_texture.to_bytes()).id == photo_texture.id


def _rewrite_meta(data: bytes, change) -> bytes:
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + n])
    meta = json.loads(header["__metadata__"]["foveate"])
    change(meta)
    header["__metadata__"]["foveate"] = json.dumps(meta)
    blob = json.dumps(header).encode()
    blob += b" " * (-len(blob) % 8)
    return len(blob).to_bytes(8, "little") + blob + data[8 + n :]


def test_load_rejects_other_versions_and_corruption(tmp_path, page_texture):
    data = page_texture.to_bytes()
    (tmp_path / "v9.fvt").write_bytes(_rewrite_meta(data, lambda m: m.update(format_version=9)))
    with pytest.raises(TextureFormatError, match="format version 9"):
        Texture.load(tmp_path / "v9.fvt")
    (tmp_path / "cut.fvt").write_bytes(data[: len(data) // 3])
    with pytest.raises(TextureFormatError):
        Texture.load(tmp_path / "cut.fvt")
    (tmp_path / "junk.fvt").write_bytes(b"\x00" * 100)
    with pytest.raises(TextureFormatError, match="not a foveate texture"):
        Texture.load(tmp_path / "junk.fvt")
    flipped = bytearray(data)
    flipped[-10] ^= 0xFF  # inside the pixel data or the last tensor
    (tmp_path / "flip.fvt").write_bytes(bytes(flipped))
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + n])
    start, end = header["image"]["data_offsets"]
    flipped = bytearray(data)
    flipped[8 + n + (start + end) // 2] ^= 0xFF
    (tmp_path / "pix.fvt").write_bytes(bytes(flipped))
    with pytest.raises(TextureFormatError, match="content hash"):
        Texture.load(tmp_path / "pix.fvt")
    with pytest.raises(TextureFormatError, match="no such"):
        Texture.load(tmp_path / "missing.fvt")


def test_load_rejects_a_damaged_config_or_a_level_of_the_wrong_shape(tmp_path, page_texture):
    """A null config or a level whose shape does not fit the image was an AttributeError or a NumPy error at the
    first select: now one TextureFormatError at load."""
    import dataclasses

    data = page_texture.to_bytes()
    for name, change in (("null", lambda m: m.update(config=None)), ("p0", lambda m: m["config"].update(patch_size=0))):
        (tmp_path / f"{name}.fvt").write_bytes(_rewrite_meta(data, change))
        with pytest.raises(TextureFormatError, match="damaged texture file"):
            Texture.load(tmp_path / f"{name}.fvt")
    for field in ("mean", "coverage"):
        levels = list(getattr(page_texture, field))
        levels[0] = levels[0][:-1]
        (tmp_path / "shape.fvt").write_bytes(dataclasses.replace(page_texture, **{field: levels}).to_bytes())
        with pytest.raises(TextureFormatError, match="inconsistent texture file"):
            Texture.load(tmp_path / "shape.fvt")
    levels = [m.clone() for m in page_texture.mean]
    levels[1][0, 0, 0] = float("nan")
    (tmp_path / "nan.fvt").write_bytes(dataclasses.replace(page_texture, mean=levels).to_bytes())
    with pytest.raises(TextureFormatError, match="not finite"):
        Texture.load(tmp_path / "nan.fvt")


def test_attach_caller_maps(photo):
    tex = encode(photo, preset="full", device="cpu")
    assert "attention" in tex.absent
    gaze = np.zeros((100, 100), np.float32)
    gaze[10:20, 70:80] = 5.0  # any resolution, any scale
    tex.attach("gaze", gaze)
    assert "attention" not in tex.absent
    g = tex.channel("gaze")
    assert g.max() == pytest.approx(1.0, abs=1e-3)
    r, c = np.unravel_index(np.argmax(g), g.shape)
    assert abs(r / g.shape[0] - 0.15) < 0.1 and abs(c / g.shape[1] - 0.75) < 0.1
    before = len(tex.channels)
    tex.attach("saliency_model_x", torch.rand(7, 9))
    assert len(tex.channels) == before + 1 and tex.channels[-1] == "user:saliency_model_x"
    tex.attach("saliency_model_x", torch.rand(7, 9))  # replacing keeps one channel
    assert len(tex.channels) == before + 1
    assert all(m.shape[-1] == before + 1 for m in tex.mean + tex.max)
    with pytest.raises(ConfigError):
        tex.attach("bad", np.zeros((2, 3, 4)))


def test_public_api_surface():
    for name in (
        "encode",
        "select",
        "FoveatePredictor",
        "Texture",
        "Selection",
        "Query",
        "Scorer",
        "EncodeConfig",
        "SelectConfig",
        "FoveateError",
    ):
        assert hasattr(foveate, name)
    assert "rgb" in list_groups()


def test_level_zero_and_one_counts():
    # a sanity check of coverage sums: coverage * tile area = image area, at every level
    h, w = 100, 75
    tex = encode(random_image(h, w), preset="fast", device="cpu")
    for lvl, cov in enumerate(tex.coverage):
        side = 16 << lvl
        assert float(cov.sum()) * side * side == pytest.approx(h * w)
    assert ops.grid_shape(h, w, 16) == tex.level_shapes[0]
