"""Synthetic images with known ground truth: rendered document pages whose every line and word box is known.

Used for the bundled example page, the tests (OCR finds the words we drew; selection covers the box we
asked about) and the evaluation fixtures that CI runs.  Rendering uses Pillow's bundled scalable font, so
the result is the same on every machine with the same Pillow version.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from ..core.types import F32, F64


@dataclass
class TextLine:
    """A line of text to draw at ``(x, y)`` (top-left, pixels) with font ``size`` px and grey ``ink``."""

    text: str
    x: int
    y: int
    size: int = 18
    ink: int = 20


@dataclass
class Page:
    """A rendered page: the image and the pixel box ``[x0, y0, x1, y1]`` of every line and word drawn."""

    image: np.ndarray
    lines: list[dict] = field(default_factory=list)
    words: list[dict] = field(default_factory=list)

    def find(self, text: str) -> dict:
        """The first line whose text contains ``text``."""
        for line in self.lines:
            if text in line["text"]:
                return line
        raise KeyError(text)


def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


def render_page(
    lines: list[TextLine],
    width: int = 850,
    height: int = 1100,
    paper: int = 250,
    rules: Sequence[tuple[int, int, int, int]] = (),
    noise: float = 0.0,
    seed: int = 0,
) -> Page:
    """Draw ``lines`` (and straight ``rules`` ``(x0, y0, x1, y1)``) on a blank page.

    ``noise`` adds Gaussian sensor noise of that standard deviation (grey levels), seeded by ``seed``.
    """
    im = Image.new("L", (width, height), paper)
    draw = ImageDraw.Draw(im)
    for x0, y0, x1, y1 in rules:
        draw.line([(x0, y0), (x1, y1)], fill=60, width=2)
    out_lines, out_words = [], []
    for ln in lines:
        font = _font(ln.size)
        draw.text((ln.x, ln.y), ln.text, fill=ln.ink, font=font)
        box = [int(v) for v in draw.textbbox((ln.x, ln.y), ln.text, font=font)]
        out_lines.append({"text": ln.text, "box": box, "size": ln.size})
        cursor: float = ln.x
        for token in ln.text.split(" "):
            if token:
                wb = [int(v) for v in draw.textbbox((cursor, ln.y), token, font=font)]
                out_words.append({"text": token, "box": wb})
            cursor += draw.textlength(token + " ", font=font)
    arr: F32 | F64 = np.asarray(im, dtype=np.float32)
    if noise > 0:
        arr = arr + np.random.default_rng(seed).normal(0.0, noise, arr.shape)
    grey = np.clip(np.rint(arr), 0, 255).astype(np.uint8)
    return Page(np.repeat(grey[..., None], 3, axis=-1), out_lines, out_words)


def invoice_page() -> Page:
    """The bundled example: a one-page invoice with a header, fields, a table, a total and small print."""
    L = TextLine
    lines = [
        L("NORTHWIND OPTICS", 60, 50, 34),
        L("Invoice", 640, 58, 28),
        L("1200 Harbor Street, Portland, OR 97201", 60, 96, 14, 70),
        L("Invoice No: NW-2026-0417", 520, 140, 16),
        L("Date: March 14, 2026", 520, 166, 16),
        L("Due: April 13, 2026", 520, 192, 16),
        L("Bill to:", 60, 140, 16),
        L("Lakeside Research Lab", 60, 166, 16),
        L("Attn: Dr. Mara Quint", 60, 192, 16),
        L("Item", 60, 270, 16),
        L("Qty", 460, 270, 16),
        L("Unit price", 560, 270, 16),
        L("Amount", 700, 270, 16),
        L("Achromatic doublet lens, 50 mm", 60, 310, 15),
        L("4", 470, 310, 15),
        L("$86.00", 575, 310, 15),
        L("$344.00", 705, 310, 15),
        L("Kinematic mirror mount", 60, 340, 15),
        L("2", 470, 340, 15),
        L("$129.50", 575, 340, 15),
        L("$259.00", 705, 340, 15),
        L("Optical breadboard, 300 x 450 mm", 60, 370, 15),
        L("1", 470, 370, 15),
        L("$412.00", 575, 370, 15),
        L("$412.00", 705, 370, 15),
        L("Calibration service", 60, 400, 15),
        L("1", 470, 400, 15),
        L("$219.50", 575, 400, 15),
        L("$219.50", 705, 400, 15),
        L("Subtotal", 560, 460, 16),
        L("$1,234.50", 700, 460, 16),
        L("Tax (0%)", 560, 488, 16),
        L("$0.00", 700, 488, 16),
        L("Total due", 560, 524, 18),
        L("$1,234.50", 700, 524, 18),
        L("Payment by bank transfer to account 4410 2291 0087, reference NW-2026-0417.", 60, 600, 13, 60),
        L("Signed: J. Alvarez, Accounts", 60, 680, 16),
        L("Signature date: 15 March 2026", 60, 706, 16),
        L("Late payments accrue interest at 1.5% per month. Goods remain the property of Northwind", 60, 1010, 10, 90),
        L("Optics until paid in full. Questions: billing@northwind.example, +1 503 555 0148.", 60, 1024, 10, 90),
    ]
    rules = [(60, 296, 790, 296), (60, 430, 790, 430), (560, 514, 790, 514)]
    return render_page(lines, rules=rules)
