"""The overlay a person reads: outlines, legend and caption sized to the picture, the legend under it (never over a
token), the heat map only where there is relevance."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from foveate import encode, select
from foveate.render import LEVEL_COLORS, legend_bar, outline_width, render_overlay
from foveate.render.overlay import BAR_COLOR, TEXT_COLOR, halo_min, shown_size


def _picture(h: int, w: int) -> np.ndarray:
    """A smooth mid-tone picture with some structure (blocks of colour, blurred): outlines must stand out on it."""
    rng = np.random.default_rng(h + w)
    small = rng.integers(60, 200, (max(2, h // 64), max(2, w // 64), 3), dtype=np.uint8)
    return cv2.GaussianBlur(cv2.resize(small, (w, h), interpolation=cv2.INTER_NEAREST), (0, 0), 3)


def _luma(rgb) -> np.ndarray:
    return np.asarray(rgb, np.float64) @ np.array([0.299, 0.587, 0.114])


@pytest.fixture(scope="module", params=[(300, 240), (1000, 760), (800, 4000)], ids=["300px", "1000px", "4000px"])
def case(request):
    h, w = request.param
    img = _picture(h, w)
    tex = encode(img, preset="fast", device="cpu", max_levels=5)
    sel = select(tex, {"points": [(w // 3, h // 2)]}, 96, mode="quadtree", cut=False)
    assert not (sel.level_map() < 0).any() and len(sel.level_counts()) >= 2  # tokens of several sizes
    return img, sel


def _boxes_shown(sel, f: float) -> list[tuple[int, int, int, int]]:
    return [
        (
            round(x0 * f),
            round(y0 * f),
            max(round(x0 * f) + 1, round(x1 * f)) - 1,
            max(round(y0 * f) + 1, round(y1 * f)) - 1,
        )
        for (x0, y0, x1, y1), g in zip(sel.boxes.tolist(), sel.gist.tolist())
        if not g
    ]


@pytest.mark.parametrize("max_side", [None, 1600])
def test_outlines_are_visible_and_the_legend_covers_no_token(case, max_side):
    img, sel = case
    ov = render_overlay(img, sel, heat=False, max_side=max_side)
    h, w = shown_size(img.shape[:2], max_side)
    plain = cv2.resize(img, (w, h), interpolation=cv2.INTER_AREA) if (h, w) != img.shape[:2] else img
    pic, bar = ov[:h], ov[h:]
    assert ov.shape[1] == w and bar.shape[0] > 0  # the legend is a bar under the picture
    boxes = _boxes_shown(sel, w / img.shape[1])
    assert boxes and all(0 <= y0 <= y1 < h for _, y0, _, y1 in boxes)  # every token lies above the bar
    # nothing is drawn over the picture but the outlines: every changed pixel lies on a box's border band
    t = outline_width((h, w))
    band = np.zeros((h, w), np.uint8)
    for x0, y0, x1, y1 in boxes:
        cv2.rectangle(band, (x0, y0), (x1, y1), 1, t + 2 * max(1, t // 2) + 2)
    changed = (pic != plain).any(axis=2)
    assert not (changed & (band == 0)).any()
    # the outlines: at least the border pixels of every box are drawn, in a level colour or the dark edge
    border = np.zeros((h, w), np.uint8)
    for x0, y0, x1, y1 in boxes:
        cv2.rectangle(border, (x0, y0), (x1, y1), 1, 1)
    drawn = pic[border == 1]
    colours = np.array(LEVEL_COLORS + [(0, 0, 0)])
    assert ((drawn[:, None, :] == colours[None]).all(axis=2).any(axis=1)).mean() > 0.99
    assert changed.mean() >= 0.9 * (border == 1).mean()
    # their contrast: where a token is shown large enough, a level colour with a black edge beside it
    large = [b for b in boxes if min(b[2] - b[0], b[3] - b[1]) + 1 >= halo_min(t)]
    assert large
    for x0, y0, _x1, y1 in large:
        y = (y0 + y1) // 2
        across = pic[y, max(0, x0 - t - 1) : x0 + t + 2]  # across the left edge: colour and black side by side
        assert (across == 0).all(axis=1).any() and _luma(across).max() - _luma(across).min() > 90
    # wide pictures get wide outlines: a 4,000-px one at full size draws them 6 px wide
    if max(h, w) >= 3000:
        assert t >= 5
        x0, y0, x1, y1 = boxes[0]
        assert changed[(y0 + y1) // 2, max(0, x0 - t) : x0 + t + 1].sum() >= t  # across the left edge
    # the legend: light text on the dark bar, its lines about 1/45 of the width (at least 14 px)
    text = _luma(bar) > 200
    assert 0.01 < text.mean() < 0.5
    assert _luma(TEXT_COLOR) - _luma(BAR_COLOR) > 180
    rows = np.flatnonzero(text.any(axis=1))
    assert rows.max() - rows.min() + 1 >= 0.4 * max(14, min(64, w / 45))
    for lvl in range(sel.num_levels):  # one swatch per level, in its colour
        assert (bar == np.array(LEVEL_COLORS[lvl], np.uint8)).all(axis=2).sum() >= 16


def test_the_legend_grows_with_the_picture(case):
    img, sel = case
    small, big = legend_bar(sel, 300), legend_bar(sel, 3000)
    assert big.shape[0] > small.shape[0] * 1.5 or big.shape[0] >= 64


def test_a_long_caption_wraps_inside_the_bar(case):
    img, sel = case
    w = img.shape[1]
    short = legend_bar(sel, w, caption="total")
    long = legend_bar(sel, w, caption=" ".join(["what is the total due on this invoice"] * 12))
    assert long.shape[1] == short.shape[1] == w and long.shape[0] > short.shape[0]
    text_cols = np.flatnonzero((_luma(long) > 200).any(axis=0))
    assert text_cols.max() < w  # nothing cut at the right edge: the words wrapped


def test_heat_only_where_there_is_relevance(case):
    img, sel = case
    ov = render_overlay(img, sel, legend=False)
    plain_ov = render_overlay(img, sel, legend=False, heat=False)
    assert ov.shape == img.shape
    rel = sel.relevance
    p = sel.patch_size
    rel = rel[: img.shape[0] // p, : img.shape[1] // p]  # whole tiles
    norm = (rel - rel.min()) / (rel.max() - rel.min())
    low = np.argwhere(norm == 0)[0]  # the least relevant tile: its centre keeps the picture's own colour
    hi = np.unravel_index(np.argmax(norm), norm.shape)
    cy, cx = low * p + p // 2
    assert (ov[cy, cx] == plain_ov[cy, cx]).all()
    hy, hx = np.array(hi) * p + p // 2
    assert (ov[hy, hx] != plain_ov[hy, hx]).any()


def test_uncovered_areas_are_dimmed_and_said(page_texture):
    sel = select(page_texture, {"boxes": [(560, 450, 790, 550)]}, 24, mode="topk", gist=False, cut=False)
    assert (sel.level_map() < 0).any() and any(n.startswith("top-k without gist: ") for n in sel.notes)
    with_note = legend_bar(sel, 850, uncovered=True)
    assert with_note.shape[0] > legend_bar(sel, 850).shape[0]
    ov = render_overlay(page_texture.image, sel, heat=False, legend=False)
    gy, gx = np.argwhere(sel.level_map() < 0)[0] * sel.patch_size + sel.patch_size // 2
    assert _luma(ov[gy, gx]) < _luma(page_texture.image[gy, gx])  # the white page is dimmed where nothing is sent
