"""Drawing a generated document (:func:`render`: grey ink on paper, blur and sensor noise, a form often faxed or
photocopied by :func:`_scanned`, a receipt often photographed on a tinted background), every item's pixel box filled
in as it is drawn."""

from __future__ import annotations

import random

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

from . import vocab as V
from .layout import Doc


def render(doc: Doc, r: random.Random) -> np.ndarray:
    """Draw the document (grey ink on paper, optional blur and sensor noise; a form often faxed, :func:`_scanned`; a
    receipt often photographed on a tinted background) and fill every item's pixel box.  Returns (H, W, 3) uint8."""
    im = Image.new("L", (doc.width, doc.height), 250)
    draw = ImageDraw.Draw(im)
    for x0, y0, x1, y1 in doc.rules:
        draw.line([(x0, y0), (x1, y1)], fill=70, width=2)
    for it in doc.items:
        f = V.font(it.font, it.size)
        width = draw.textlength(it.text, font=f)
        x = it.x if it.anchor == "l" else (it.x - width if it.anchor == "r" else it.x - width / 2)
        draw.text((x, it.y), it.text, fill=20, font=f)
        it.box = [int(v) for v in draw.textbbox((x, it.y), it.text, font=f)]
    if doc.kind == "form" and r.random() < 0.5:
        im = _scanned(im, r)
    if r.random() < 0.5:
        im = im.filter(ImageFilter.GaussianBlur(r.uniform(0.3, 0.9)))
    a = np.asarray(im, np.float32) + np.random.default_rng(r.randint(0, 2**31)).normal(
        0, r.uniform(0, 8), (doc.height, doc.width)
    )
    rgb = np.repeat(np.clip(np.rint(a), 0, 255).astype(np.uint8)[..., None], 3, -1)
    if doc.kind == "receipt" and r.random() < 0.7:
        pad = r.randint(10, 80)
        out = np.empty((rgb.shape[0] + 2 * pad, rgb.shape[1] + 2 * pad, 3), np.uint8)
        out[:] = np.array([r.randint(40, 160) for _ in range(3)], np.uint8)
        out[pad : pad + rgb.shape[0], pad : pad + rgb.shape[1]] = rgb
        for it in doc.items:
            it.box = [v + pad for v in it.box]
        rgb = out
    return rgb


def _scanned(im: Image.Image, r: random.Random) -> Image.Image:
    """A fax or photocopy of a page: scanned at 60-90 % of its resolution and brought back (blocky or soft), often
    thresholded to black and white, with specks of toner.  The page keeps its size, so every box stays put."""
    w, h = im.size
    f = r.uniform(0.6, 0.9)
    small = im.resize((max(1, round(w * f)), max(1, round(h * f))), Image.Resampling.BILINEAR)
    if r.random() < 0.6:
        t = r.randint(120, 190)
        small = small.point(lambda v: 10 if v < t else 250)
    im = small.resize((w, h), Image.Resampling.NEAREST if r.random() < 0.5 else Image.Resampling.BILINEAR)
    draw = ImageDraw.Draw(im)
    for _ in range(int(w * h * r.uniform(0, 4e-4))):
        x, y, d = r.uniform(0, w), r.uniform(0, h), r.uniform(0.5, 2)
        draw.ellipse([x, y, x + d, y + d], fill=20)
    return im
