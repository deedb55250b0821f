"""Generated documents as born-digital PDFs: the same layout programs (:data:`.documents.KINDS`) written as one PDF
page with a text layer (reportlab, the ``dev`` extra), so that reading them exercises the PDF text-layer path rather
than OCR.

The page is ``width / dpi`` by ``height / dpi`` inches, so that rendered at ``dpi`` (the document reader's default
144) it is the layout's own pixel grid and every item's box (:func:`layout_boxes`, measured with Pillow on the same
font file at the same pixel size, as :func:`.draw.render` measures them) is where the item is inked.  No paper
noise, blur or scan: a born-digital page is crisp.
"""

from __future__ import annotations

import io
import random
from pathlib import Path

from PIL import Image, ImageDraw

from . import vocab as V
from .documents import KINDS, check_kinds
from .layout import Doc
from .questions import questions

#: the render resolution the pages are laid out for (the document reader's default)
PDF_DPI = 144


def _x(draw: ImageDraw.ImageDraw, it, f) -> float:
    width = draw.textlength(it.text, font=f)
    return float(it.x if it.anchor == "l" else (it.x - width if it.anchor == "r" else it.x - width / 2))


def layout_boxes(doc: Doc) -> Doc:
    """Fill every item's pixel box ``[x0, y0, x1, y1]`` (top-left origin) without drawing the page; returns ``doc``."""
    draw = ImageDraw.Draw(Image.new("L", (1, 1)))
    for it in doc.items:
        f = V.font(it.font, it.size)
        it.box = [int(v) for v in draw.textbbox((_x(draw, it, f), it.y), it.text, font=f)]
    return doc


def write_pdf(doc: Doc, dpi: int = PDF_DPI) -> bytes:
    """One PDF page of ``doc`` with a text layer (every item a string in its own TrueType font, rules as lines).
    Needs a font file for every item (``foveate.synth.vocab.font_files``: DejaVu); Pillow's built-in font has none
    that a PDF could embed, which is a ``ConfigError``."""
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFont
    from reportlab.pdfgen import canvas

    from ..core.errors import ConfigError

    k = 72.0 / dpi  # points per pixel
    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=(doc.width * k, doc.height * k), invariant=True)  # no timestamp
    c.setStrokeGray(70 / 255)
    c.setLineWidth(2 * k)
    for x0, y0, x1, y1 in doc.rules:
        c.line(x0 * k, (doc.height - y0) * k, x1 * k, (doc.height - y1) * k)
    c.setFillGray(20 / 255)
    draw = ImageDraw.Draw(Image.new("L", (1, 1)))
    for it in doc.items:
        if it.font is None:
            raise ConfigError("a generated PDF needs a TrueType font file (DejaVu); none was found on this machine")
        name = Path(it.font).stem
        if name not in pdfmetrics.getRegisteredFontNames():
            pdfmetrics.registerFont(TTFont(name, it.font))
        f = V.font(it.font, it.size)
        x = _x(draw, it, f)
        ascent = f.getmetrics()[0] if hasattr(f, "getmetrics") else it.size
        c.setFont(name, it.size * k)
        c.drawString(x * k, (doc.height - it.y - ascent) * k, it.text)
        it.box = [int(v) for v in draw.textbbox((x, it.y), it.text, font=f)]
    c.showPage()
    c.save()
    return buf.getvalue()


def pdf_document(kind: str, seed: str | int, dpi: int = PDF_DPI) -> tuple[bytes, Doc, list[dict]]:
    """A generated document of ``kind`` as (PDF bytes, its layout with every item's box, its questions in the
    ``queries.jsonl`` form without ``image``); a function of ``kind`` and ``seed``."""
    check_kinds((kind,))
    r = random.Random(f"pdf:{seed}:{kind}")
    doc = KINDS[kind](r)
    data = write_pdf(doc, dpi)
    return data, doc, questions(doc, r)
