"""Two refinements of a plan's pictures, each never costlier and never blurrier than what it replaces.

* :func:`composite`: several regions packed into one picture, a thin grey line between them.  Where a provider bills
  per picture (Gemini 3's fixed count per picture, a tile rule's base tokens), one picture holding a context and
  three crops costs one price instead of four; the planner takes it where it is cheaper and every region keeps its
  scale (the provider must not shrink the composite below the regions' scales).
* :func:`sharpen`: a picture sent larger where the same option bills the same tokens for it (a flat price, a tile or
  patch not yet full): the model sees it sharper at no cost.
"""

from __future__ import annotations

import math

import numpy as np

from .picture import Part, Picture
from .rules.base import VlmRule

#: pixels between two regions of a composite (a mid-grey line the model can tell from the page)
SEPARATOR = 4
#: grey level of the separator and the composite's background
SEPARATOR_GREY = 128


def _pack(sizes: list[tuple[int, int]], width: int) -> tuple[list[tuple[int, int]], tuple[int, int]]:
    """Shelf packing, tallest first, in rows no wider than ``width`` (a row holds at least one region): each
    region's top-left and the canvas size (w, h)."""
    order = sorted(range(len(sizes)), key=lambda i: (-sizes[i][1], -sizes[i][0], i))
    at: list[tuple[int, int]] = [(0, 0)] * len(sizes)
    x = y = row_h = canvas_w = 0
    for i in order:
        w, h = sizes[i]
        if x > 0 and x + w > width:
            y += row_h + SEPARATOR
            x = row_h = 0
        at[i] = (x, y)
        x += w + SEPARATOR
        row_h = max(row_h, h)
        canvas_w = max(canvas_w, x - SEPARATOR)
    return at, (canvas_w, y + row_h)


def composite(
    rule: VlmRule, pictures: list[Picture], max_side: int | None = None, below: int | None = None
) -> Picture | None:
    """The cheapest single picture that packs ``pictures`` (each at its own sent size) and that the provider takes
    without shrinking it (so every region keeps its scale); ``None`` when there is no such picture or it costs no less
    than ``below`` (default: the pictures apart)."""
    if len(pictures) < 2:
        return None
    sizes = [p.sent for p in pictures]
    area = sum(w * h for w, h in sizes)
    widest = max(w for w, _ in sizes)
    apart = sum(p.tokens for p in pictures) if below is None else below
    best: Picture | None = None
    for aspect in (1.0, 0.75, 1.33, 0.5, 2.0):  # a few row widths: the provider's resize favours some shapes
        width = max(widest, int(math.ceil(math.sqrt(area * aspect))))
        at, (cw, ch) = _pack(sizes, width)
        if max_side is not None and max(cw, ch) > max_side:
            continue
        for option in rule.options:
            t, sw, sh = rule.price(np.array([cw]), np.array([ch]), option)
            tokens, seen = int(t[0]), (int(sw[0]), int(sh[0]))
            if seen != (cw, ch) or tokens >= apart or (best is not None and tokens >= best.tokens):
                continue  # shrunk (a region would fall below its scale), or no saving
            parts = tuple(Part(p.box, a, p.sent) for p, a in zip(pictures, at))
            best = Picture("composite", _hull([p.box for p in pictures]), (cw, ch), seen, tokens, option, 0, parts)
    return best


def _hull(boxes: list[tuple[int, int, int, int]]) -> tuple[int, int, int, int]:
    return (min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes))


#: sizes tried between a picture's own and its source size when sharpening it
SHARPEN_STEPS = 48


def sharpen(rule: VlmRule, pic: Picture) -> Picture:
    """``pic`` sent at the largest size (up to its source size) that the same option bills no more for and that the
    model sees no less sharply; ``pic`` itself when there is none, or for a composite."""
    if pic.parts:
        return pic
    x0, y0, x1, y1 = pic.box
    bw, bh = x1 - x0, y1 - y0
    now = max(bw / pic.sent[0], bh / pic.sent[1])  # source px per sent px
    if now <= 1.0 + 1e-9:
        return pic
    scales = np.exp(np.linspace(math.log(now), 0.0, SHARPEN_STEPS + 1)[1:])  # coarse to fine, ending at the source
    fw, fh = rule.fit(np.full(len(scales), bw), np.full(len(scales), bh), scales)
    t, sw, sh = rule.price(fw, fh, pic.option)
    seen_scale = np.maximum(bw / sw, bh / sh)
    ok = np.nonzero((t <= pic.tokens) & (seen_scale <= pic.scale + 1e-9) & (fw >= pic.sent[0]) & (fh >= pic.sent[1]))[0]
    if not len(ok):
        return pic
    i = int(ok[np.argmin(seen_scale[ok] + 1e-12 * ok)])  # the sharpest view; the smallest size among equals
    if seen_scale[i] >= pic.scale - 1e-9:
        return pic
    return Picture(
        pic.kind, pic.box, (int(fw[i]), int(fh[i])), (int(sw[i]), int(sh[i])), int(t[i]), pic.option, pic.keeps
    )
