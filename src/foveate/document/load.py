"""Read a multi-page document into pages: a PDF rendered with PDFium (pypdfium2) at ``dpi``, or the frames of a
multi-page TIFF (Pillow).  The page count is checked against ``max_pages`` and each page's pixel count against
``max_pixels`` *before* anything is rendered, so a 1,000-page file or a poster-sized page is refused from its
header, not after minutes of rendering or an out-of-memory.

A PDF page with a text layer also gives its lines (:mod:`.textlayer`), mapped to the rendered pixel grid; a page
without one (a scan, an image-only page) gives ``None`` and goes through OCR at encode time.

Errors (one line each, all :class:`~foveate.core.errors.DocumentError`): corrupt or truncated
(:class:`DocumentDecodeError`), password-protected (:class:`DocumentEncryptedError`), no page
(:class:`DocumentEmptyError`), more pages than the cap (:class:`DocumentTooLongError`).
"""

from __future__ import annotations

import io as _io
import math
import os
import re
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..channels.text.ocr import OcrLine
from ..core.errors import (
    ConfigError,
    DocumentDecodeError,
    DocumentEmptyError,
    DocumentEncryptedError,
    DocumentTooLongError,
    ImageDecodeError,
    ImageTooLargeError,
)
from ..core.io import DEFAULT_MAX_PIXELS, load_image

#: PDF render resolution: 144 dpi puts 10 pt print at 20 px, where OCR and a VLM read it comfortably, and a Letter
#: page at 1224 x 1584 px
DEFAULT_DPI = 144.0
#: pages a document may have (the page cap); more is refused before rendering
DEFAULT_MAX_PAGES = 50
MAX_DPI = 600.0
PDF_MAGIC = b"%PDF-"
_TIFF_MAGICS = (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+")

#: where a page's text lines come from
TEXT_LAYER, OCR = "text-layer", "ocr"


@dataclass(frozen=True)
class DocumentPage:
    """One rendered page.

    Attributes:
        image: (H, W, 3) uint8 RGB, the page as displayed (its /Rotate applied).
        lines: the text layer's lines in pixels of ``image`` (``None``: no text layer; the page is OCR'd).
        size_pt: (width, height) of the displayed page in PDF points (``None`` for a TIFF frame).
        rotation: the page's /Rotate in degrees (0 for a TIFF frame).
    """

    image: np.ndarray
    lines: list[OcrLine] | None = None
    size_pt: tuple[float, float] | None = None
    rotation: int = 0

    @property
    def text_source(self) -> str:
        return TEXT_LAYER if self.lines is not None else OCR


@dataclass(frozen=True)
class LoadedDocument:
    """A document's pages, in order, and how they were read (``kind``: ``pdf`` or ``tiff``; ``dpi`` for a PDF)."""

    kind: str
    pages: list[DocumentPage]
    dpi: float | None = None


def _read_bytes(source: Any) -> tuple[bytes, str]:
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source), "<bytes>"
    path = Path(source)
    if not path.is_file():
        raise ImageDecodeError(f"{path}: no such file")
    try:
        return path.read_bytes(), str(path)
    except OSError as exc:
        raise ImageDecodeError(f"{path}: cannot read ({exc.strerror or exc})") from exc


def _head(source: Any) -> bytes:
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source[:8])
    try:
        with open(source, "rb") as f:
            return f.read(8)
    except OSError:
        return b""


def document_kind(source: Any) -> str | None:
    """``"pdf"`` for a PDF (by its magic bytes, or a ``.pdf`` name), ``"tiff"`` for a TIFF of more than one page,
    ``None`` for anything else (a single image: :func:`foveate.core.io.load_image` reads it)."""
    if not isinstance(source, (str, os.PathLike, bytes, bytearray, memoryview)):
        return None
    head = _head(source)
    is_pdf_name = isinstance(source, (str, os.PathLike)) and str(source).lower().endswith(".pdf")
    if head.startswith(PDF_MAGIC) or (is_pdf_name and Path(str(source)).is_file()):
        return "pdf"
    if head[:4] in _TIFF_MAGICS:
        from PIL import Image

        try:
            src = _io.BytesIO(bytes(source)) if isinstance(source, (bytes, bytearray, memoryview)) else source
            im = Image.open(src)
        except Exception:
            return None  # not a TIFF Pillow opens: load_image says what is wrong
        with im, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Pillow's "Corrupt EXIF data" on a damaged page list: the loader says it
            try:
                return "tiff" if int(getattr(im, "n_frames", 1)) > 1 else None
            except Exception:  # its list of pages breaks off (a file cut short): a document the loader refuses
                return "tiff"
    return None


def load_document(
    source: Any,
    *,
    dpi: float = DEFAULT_DPI,
    max_pages: int = DEFAULT_MAX_PAGES,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    text_layer: bool = True,
) -> LoadedDocument:
    """The pages of a PDF or multi-page TIFF (path or bytes).

    Args:
        dpi: PDF render resolution (72 = one pixel per point); TIFF frames keep their own pixels.
        max_pages: the page cap: a document with more pages is refused (:class:`DocumentTooLongError`).
        max_pixels: per page, as for an image (:class:`ImageTooLargeError`, from the page size before rendering).
        text_layer: read a PDF page's text layer where it has one (``False``: every page goes through OCR).
    """
    if max_pages < 1:
        raise ConfigError(f"max_pages must be at least 1, got {max_pages}")
    if not (math.isfinite(dpi) and 1.0 <= dpi <= MAX_DPI):
        raise ConfigError(f"dpi must be in [1, {MAX_DPI:g}], got {dpi}")
    data, name = _read_bytes(source)
    if not data:
        raise DocumentDecodeError(f"{name}: the file is empty (0 bytes)")
    if data.startswith(PDF_MAGIC) or name.lower().endswith(".pdf"):
        return _load_pdf(data, name, dpi, max_pages, max_pixels, text_layer)
    if data[:4] in _TIFF_MAGICS:
        return _load_tiff(data, name, max_pages, max_pixels)
    raise DocumentDecodeError(f"{name}: not a PDF or a TIFF")


def _check_count(n: int, max_pages: int, name: str) -> None:
    if n <= 0:
        raise DocumentEmptyError(f"{name}: the document has no page")
    if n > max_pages:
        raise DocumentTooLongError(
            f"{name}: {n:,} pages, above the page cap of {max_pages:,}; split the document or raise the cap "
            "(max_pages, --max-pages)"
        )


def _declares_no_page(data: bytes) -> bool:
    """The file's page tree says ``/Count 0`` and it has no page object (in plain, uncompressed objects)."""
    empty = re.search(rb"<<[^>]*/Type\s*/Pages\b[^>]*/Count\s+0\b|<<[^>]*/Count\s+0\b[^>]*/Type\s*/Pages\b", data)
    return empty is not None and re.search(rb"/Type\s*/Page(?![a-zA-Z])", data) is None


def _open_pdf(data: bytes, name: str) -> Any:
    import pypdfium2 as pdfium

    try:
        return pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        if _declares_no_page(data):  # PDFium refuses a page tree without pages, and leaves its last error stale
            raise DocumentEmptyError(f"{name}: the document has no page") from exc
        code = getattr(exc, "err_code", None)
        if code == 4:  # FPDF_ERR_PASSWORD
            raise DocumentEncryptedError(
                f"{name}: the PDF is password-protected; decrypt it (qpdf --decrypt) and try again"
            ) from exc
        if code == 6:  # FPDF_ERR_SECURITY
            raise DocumentEncryptedError(f"{name}: the PDF uses an unsupported security handler") from exc
        raise DocumentDecodeError(f"{name}: not a readable PDF (corrupt or truncated: {exc})") from exc


#: PDFium is not thread-safe (pypdfium2's documentation: no two threads may call into it at once): every use of it in
#: the process holds this lock.  Without it, a server's concurrent PDF uploads crashed the process ("double free or
#: corruption").  Processes each have their own PDFium.
PDFIUM_LOCK = threading.Lock()


def _load_pdf(data: bytes, name: str, dpi: float, max_pages: int, max_pixels: int, text_layer: bool) -> LoadedDocument:
    with PDFIUM_LOCK:
        return _load_pdf_locked(data, name, dpi, max_pages, max_pixels, text_layer)


def _load_pdf_locked(
    data: bytes, name: str, dpi: float, max_pages: int, max_pixels: int, text_layer: bool
) -> LoadedDocument:
    from .textlayer import page_lines

    pdf = _open_pdf(data, name)
    try:
        n = len(pdf)
        _check_count(n, max_pages, name)
        scale = dpi / 72.0
        sizes = [pdf.get_page_size(i) for i in range(n)]  # displayed size in points, /Rotate applied
        for i, (w, h) in enumerate(sizes):  # every page's size before the first render
            wp, hp = math.ceil(w * scale), math.ceil(h * scale)
            if wp <= 0 or hp <= 0:
                raise DocumentDecodeError(f"{name}: page {i + 1} has an empty size {w:g} x {h:g} pt")
            if wp * hp > max_pixels:
                raise ImageTooLargeError(
                    f"{name}: page {i + 1} at {dpi:g} dpi is {wp}x{hp} = {wp * hp:,} pixels, above the limit of "
                    f"{max_pixels:,}; lower the dpi (--dpi) or raise max_pixels (--max-pixels)"
                )
        pages = []
        for i in range(n):
            page = pdf[i]
            try:
                bitmap = page.render(scale=scale, rev_byteorder=True, may_draw_forms=False)
                rgb = np.ascontiguousarray(bitmap.to_numpy()[..., :3])
                lines = page_lines(page, rgb.shape[1], rgb.shape[0]) if text_layer else None
                pages.append(DocumentPage(rgb, lines, (float(sizes[i][0]), float(sizes[i][1])), page.get_rotation()))
            except Exception as exc:  # PDFium on a broken page object
                raise DocumentDecodeError(f"{name}: page {i + 1} cannot be rendered ({exc})") from exc
            finally:
                page.close()
        return LoadedDocument("pdf", pages, dpi)
    finally:
        pdf.close()


def _load_tiff(data: bytes, name: str, max_pages: int, max_pixels: int) -> LoadedDocument:
    from PIL import Image, ImageSequence

    try:
        im = Image.open(_io.BytesIO(data))
    except Exception as exc:
        raise DocumentDecodeError(f"{name}: not a readable TIFF ({exc})") from exc
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Pillow's raw "Corrupt EXIF data": the error below says it in one line
            n = int(getattr(im, "n_frames", 1))
    except Exception as exc:  # a page's directory points past the end: read as one page, the rest would be lost
        im.close()
        raise DocumentDecodeError(f"{name}: the TIFF's list of pages breaks off (a file cut short?) ({exc})") from exc
    with im:
        _check_count(n, max_pages, name)
        pages = []
        for i, frame in enumerate(ImageSequence.Iterator(im)):
            try:
                pages.append(DocumentPage(load_image(frame.copy(), max_pixels=max_pixels)))
            except ImageTooLargeError:
                raise
            except Exception as exc:
                raise DocumentDecodeError(f"{name}: page {i + 1} cannot be decoded ({exc})") from exc
    return LoadedDocument("tiff", pages)
