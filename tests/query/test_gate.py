"""The OCR gate (``ocr="auto"``, the default): no text, no OCR; an image with text -- a page, a sign in a picture --
is read exactly as full-page OCR reads it.  Real rapidocr models throughout."""

from __future__ import annotations

import numpy as np
import pytest

import foveate
from foveate.channels.base import EncodeContext
from foveate.channels.registry import run_groups
from foveate.channels.text import gate as G
from foveate.channels.text.ocr import ocr_runtime, run_ocr
from foveate.core.config import EncodeConfig
from foveate.core.errors import ConfigError
from foveate.synth import TextLine, render_page


def _colour_field(h: int, w: int, seed: int, smooth: int = 6) -> np.ndarray:
    """A smooth random picture: bicubically interpolated colours from a coarse random grid."""
    import cv2

    rng = np.random.default_rng(seed)
    grid = rng.uniform(40, 200, (smooth, smooth + 2, 3)).astype(np.float32)
    return np.clip(cv2.resize(grid, (w, h), interpolation=cv2.INTER_CUBIC), 0, 255).astype(np.uint8)


def _textured(h: int, w: int) -> np.ndarray:
    """A colour field with fine noise over it: high-frequency texture everywhere, no text."""
    rng = np.random.default_rng(5)
    return (_colour_field(h, w, 3).astype(np.int16) + rng.integers(-12, 13, (h, w, 3))).clip(0, 255).astype(np.uint8)


@pytest.fixture(scope="module")
def sign_picture() -> np.ndarray:
    """A 640x480 picture with high-frequency texture everywhere but one small sign of two text lines."""
    img = _textured(480, 640)
    sign = render_page(
        [TextLine("PARKING", 12, 8, 28), TextLine("Level 2 exit", 12, 44, 18)], width=170, height=74, paper=235
    ).image
    img[300:374, 400:570] = sign
    return img


def test_a_page_is_read_whole_and_exactly_as_full_page_ocr(page):
    """Mostly paper with some ink: read whole at step 0, without the small copy or a window."""
    auto, always = run_ocr(page.image, "auto"), run_ocr(page.image, "always")
    assert auto.gate["detector"] == "full" and auto.gate["page"] and auto.gate["windows"] == 0 and always.gate is None
    assert auto.lines == always.lines and len(auto.lines) >= 30


def test_step_0_takes_paper_with_ink_for_a_page_and_nothing_else(page, sign_picture):
    """Blank paper, a photo-like picture and a grey sheet are not pages; a ruled sheet without words is, and costs
    a full pass that reads nothing (what step 0 risks: time, never a line)."""
    bgr = np.ascontiguousarray(page.image[..., ::-1])
    assert G.looks_like_page(bgr)
    blank, grey = np.full((480, 640, 3), 235, np.uint8), np.full((480, 640, 3), 150, np.uint8)
    assert not any(G.looks_like_page(x) for x in (blank, grey, sign_picture, _marks("fence")))
    ruled = blank.copy()
    for y in range(60, 440, 40):
        ruled[y : y + 3, 40:600] = 20
    assert G.looks_like_page(ruled)
    res = run_ocr(ruled[..., ::-1].copy(), "auto")
    assert res.gate["page"] and res.gate["detector"] == "full" and res.lines == run_ocr(ruled, "always").lines == []


def test_a_sign_in_a_textured_picture_is_read_as_full_page_ocr_reads_it(sign_picture):
    auto, always = run_ocr(sign_picture, "auto"), run_ocr(sign_picture, "always")
    assert auto.gate["detector"] == "full" and auto.gate["blobs"] >= 1
    assert auto.gate["windows"] >= 1 and auto.gate["reading"] in ("PARKING", "Level 2 exit")
    assert [ln.text for ln in always.lines] == ["PARKING", "Level 2 exit"]
    assert auto.lines == always.lines


def test_nothing_to_read_nothing_read(sign_picture):
    """Blank, smoothly shaded and finely textured pictures without text: the gate says so and nothing is read
    (the detector alone answers 0.2-0.5 in the middle of a blank image: the ink test keeps that out)."""
    textured = sign_picture.copy()
    textured[300:374, 400:570] = _textured(74, 170)
    for img in (
        np.full((480, 640, 3), 200, np.uint8),
        np.zeros((480, 640, 3), np.uint8),
        _colour_field(480, 640, 3),
        textured,
    ):
        res = run_ocr(img, "auto")
        assert res.lines == [] and res.gate["detector"] == "none" and res.gate["blobs"] == 0
    # full-page OCR reads nothing in the blank and shaded ones either (in the noise it may read a fragment)
    assert all(
        run_ocr(img, "always").lines == []
        for img in (np.full((480, 640, 3), 200, np.uint8), _colour_field(480, 640, 3))
    )
    assert run_ocr(np.zeros((5, 300, 3), np.uint8), "auto").lines == []


def _marks(kind: str) -> np.ndarray:
    """A grey picture with marks the detector rates as text: a fence's pickets or a row of dashes.  (A row of empty
    boxes is not one of them: the float recogniser reads it as check boxes, ``□ □ □``.)"""
    img = np.full((480, 640, 3), 150, np.uint8)
    if kind == "fence":
        img[200:260, 100:500:6] = 30
    else:
        for x in range(100, 500, 12):
            img[220:232, x : x + 6] = 20
    return img


@pytest.mark.parametrize("kind", ["fence", "dashes"])
def test_marks_the_detector_takes_for_text_are_read_in_their_windows_and_skipped(kind):
    """Step 4: the blobs count as text on the small copy, their windows read no line at the OCR's confidence, so
    the image is not read whole -- and full-page OCR reads nothing there either."""
    auto = run_ocr(_marks(kind), "auto")
    assert auto.gate["blobs"] >= 1 and auto.gate["windows"] >= 1
    assert auto.gate["detector"] == "none" and auto.gate["reading"] == "" and auto.lines == []
    assert run_ocr(_marks(kind), "always").lines == []


def _one_sign(text: str) -> np.ndarray:
    img = _textured(480, 640)
    img[300:364, 400:490] = render_page([TextLine(text, 12, 8, 40)], width=90, height=64, paper=235).image
    return img


def test_a_lone_glyph_counts_as_text_only_when_read_as_print(monkeypatch):
    """A window reading one character decides "text" only at :data:`LONE_GLYPH_SCORE` (what the recogniser makes
    of a photo's texture as one glyph reads at 0.56-0.79 on the shared photos); a printed letter reads at ~1.0, and
    two characters count at the OCR's own threshold."""
    letter, word = _one_sign("A"), _one_sign("OK")
    auto = run_ocr(letter, "auto")
    assert auto.gate["detector"] == "full" and auto.gate["reading"] == "A"
    assert [ln.text for ln in auto.lines] == [ln.text for ln in run_ocr(letter, "always").lines] == ["A"]
    monkeypatch.setattr(G, "LONE_GLYPH_SCORE", 1.01)  # no glyph alone is ever enough
    assert run_ocr(letter, "auto").gate["detector"] == "none"
    assert run_ocr(word, "auto").gate["reading"] == "OK"


def test_windows_cover_every_blob_on_the_grid_inside_the_image():
    """Each blob (grown by the margin) lies inside one window; windows are cut on the grid (or the image's side),
    stay inside the image, and line-like ones come first."""
    mask = np.zeros((96, 128), bool)
    mask[10:14, 10:60] = True  # a line
    mask[50:58, 100:106] = True  # a speck
    mask[80:90, 2:8] = True  # another, near the edge
    h, w = 480, 640
    wins = G.windows(mask, (h, w))
    assert len(wins) == 3
    assert (wins[0][2] - wins[0][0]) >= 2 * (wins[0][3] - wins[0][1])  # the line first
    sy, sx = h / mask.shape[0], w / mask.shape[1]
    for y0, y1, x0, x1 in ((10, 14, 10, 60), (50, 58, 100, 106), (80, 90, 2, 8)):
        assert any(a <= x0 * sx and b <= y0 * sy and x1 * sx <= c and y1 * sy <= d for a, b, c, d in wins)
    for a, b, c, d in wins:
        assert 0 <= a < c <= w and 0 <= b < d <= h
        assert (c - a) % G.WINDOW_GRID == 0 or c - a == w
        assert (d - b) % G.WINDOW_GRID == 0 or d - b == h


def test_the_gate_is_cheaper_than_the_detector_it_saves(sign_picture):
    """The gate runs the detector on a copy of at most GATE_SIDE px: fewer pixels than rapidocr's full-scale input."""
    from foveate.channels.text.ocr import ocr_engine

    det = ocr_engine()._load_det_model()
    bgr = np.ascontiguousarray(sign_picture[..., ::-1])
    full = det.get_preprocess().resize(bgr)
    assert max(full.shape[:2]) > 1.5 * G.GATE_SIDE  # a 640x480 picture is read at 992x736
    blobs, share = G.text_blobs(det, bgr)
    assert blobs >= 1 and 0 < share < 0.2


def test_the_ocr_option_is_checked_and_its_default_hashes_as_unset():
    assert EncodeConfig(options={"ocr": "auto"}) == EncodeConfig()
    assert EncodeConfig(options={"ocr": "auto"}).hash() == EncodeConfig().hash()
    assert EncodeConfig(options={"ocr": "always"}).hash() != EncodeConfig().hash()
    assert EncodeConfig().option("ocr") == "auto"
    with pytest.raises(ConfigError, match="ocr"):
        EncodeConfig(options={"ocr": "sometimes"})
    with pytest.raises(ConfigError, match="unknown OCR mode"):
        run_ocr(np.zeros((64, 64, 3), np.uint8), "sometimes")


def test_the_texture_says_how_its_text_was_read(page_texture, sign_picture):
    assert page_texture.extras["text"]["ocr"]["mode"] == "auto"
    assert page_texture.extras["text"]["ocr"]["gate"]["detector"] == "full"
    assert page_texture.extras["text"]["ocr"]["gate"]["ms"] > 0
    tex = foveate.encode(sign_picture, device="cpu", options={"ocr": "always"})
    assert tex.extras["text"]["ocr"] == {"mode": "always", "runtime": ocr_runtime()}
    assert [ln["text"] for ln in tex.extras["text"]["lines"]] == ["PARKING", "Level 2 exit"]


@pytest.mark.parametrize("overlap", ["0", "1"])
def test_the_text_group_beside_the_others_gives_the_same_texture(overlap, sign_picture, monkeypatch):
    monkeypatch.setenv("FOVEATE_ENCODE_OVERLAP", overlap)
    cfg = EncodeConfig()
    names = ("rgb", "edges", "clusters", "text")
    x0, channels, timings, absent = run_groups(EncodeContext(image=sign_picture, config=cfg), names)
    monkeypatch.setenv("FOVEATE_ENCODE_OVERLAP", "0")
    ref = run_groups(EncodeContext(image=sign_picture, config=cfg), names)
    np.testing.assert_allclose(x0, ref[0], atol=1e-6)  # OpenCV's threads may sum in another order
    assert channels == ref[1] and absent == ref[3] and set(timings) == set(names)


def test_a_failing_background_group_fails_the_encode(sign_picture, monkeypatch):
    monkeypatch.setenv("FOVEATE_ENCODE_OVERLAP", "1")

    def boom(ctx):
        raise RuntimeError("text group failed")

    from foveate.channels import registry

    group = registry.get_group("text")
    monkeypatch.setitem(
        registry._REGISTRY,
        "text",
        registry.ChannelGroup("text", group.channels, boom, group.cost, group.description, background=True),
    )
    with pytest.raises(RuntimeError, match="text group failed"):
        run_groups(EncodeContext(image=sign_picture, config=EncodeConfig()), ("rgb", "text"))


def test_ocr_threads_are_decided_in_one_place(monkeypatch):
    from foveate.core import device
    from foveate.core.errors import DeviceError

    monkeypatch.setenv("FOVEATE_OCR_THREADS", "3")
    assert device.ocr_threads() == 3
    monkeypatch.setenv("FOVEATE_OCR_THREADS", "many")
    with pytest.raises(DeviceError):
        device.ocr_threads()
    monkeypatch.delenv("FOVEATE_OCR_THREADS")
    assert device.ocr_threads() == device.cpu_cores() >= 1
    monkeypatch.setenv("FOVEATE_ENCODE_OVERLAP", "0")
    assert device.encode_overlap() is False
