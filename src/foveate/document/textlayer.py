"""A born-digital PDF page's own text, as the text group's lines: PDFium's characters (text page) grouped into words
and lines, their boxes mapped from PDF user space (origin bottom-left, points) to the rendered page's pixels (origin
top-left), the page's /Rotate and crop box included.  What OCR would read, without OCR: exact text, exact boxes.

A page counts as having a text layer when it has a visible character -- except a scan with a few characters stamped
on it (images cover half the page or more and fewer than :data:`SCAN_MAX_CHARS` characters): that one is OCR'd.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..channels.text.ocr import OcrLine, OcrWord

#: a page mostly covered by images with fewer characters than this is a scan (OCR'd), not a born-digital page
SCAN_MAX_CHARS = 50
#: a horizontal gap wider than this many line heights starts a new line (a form's columns: what OCR's detector
#: splits too)
GAP_SPLIT = 1.2
_SPACES = {" ", "\t", "\r", "\n", "\xa0", "\x00", "\ufffe", "\x02"}

Box = tuple[float, float, float, float]  # x0, y0, x1, y1 in pixels (float)


def page_affine(bbox: Sequence[float], rotation: int, width_px: int, height_px: int) -> np.ndarray:
    """The 2 x 3 affine from PDF user space to rendered pixels, ``[X, Y] = A @ [x, y, 1]``.

    Args:
        bbox: the page's displayed box ``(left, bottom, right, top)`` in user space (points).
        rotation: the page's /Rotate, 0, 90, 180 or 270 (clockwise, as displayed).
        width_px, height_px: the rendered bitmap's size (PDFium stretches the displayed box onto it exactly).
    """
    left, bottom, right, top = (float(v) for v in bbox)
    rot = int(rotation) % 360
    w_pt, h_pt = (right - left, top - bottom) if rot in (0, 180) else (top - bottom, right - left)
    sx, sy = width_px / w_pt, height_px / h_pt
    if rot == 0:  # X = (x - l) sx, Y = (t - y) sy
        m = [[sx, 0.0, -left * sx], [0.0, -sy, top * sy]]
    elif rot == 90:  # X = (y - b) sx, Y = (x - l) sy
        m = [[0.0, sx, -bottom * sx], [sy, 0.0, -left * sy]]
    elif rot == 180:  # X = (r - x) sx, Y = (y - b) sy
        m = [[-sx, 0.0, right * sx], [0.0, sy, -bottom * sy]]
    elif rot == 270:  # X = (t - y) sx, Y = (r - x) sy
        m = [[0.0, -sx, top * sx], [-sy, 0.0, right * sy]]
    else:
        raise ValueError(f"a page rotation must be a multiple of 90, got {rotation}")
    return np.asarray(m, np.float64)


def map_box(affine: np.ndarray, box: Sequence[float]) -> Box:
    """A user-space box ``(left, bottom, right, top)`` as a pixel box ``(x0, y0, x1, y1)`` (floats)."""
    left, bottom, right, top = box
    corners = np.array([[left, bottom, 1.0], [right, top, 1.0]])
    xy = corners @ affine.T  # (2, 2)
    return (
        float(xy[:, 0].min()),
        float(xy[:, 1].min()),
        float(xy[:, 0].max()),
        float(xy[:, 1].max()),
    )


def _pixel_box(b: Box, w: int, h: int) -> tuple[int, int, int, int]:
    return (
        int(np.clip(math.floor(b[0]), 0, w)),
        int(np.clip(math.floor(b[1]), 0, h)),
        int(np.clip(math.ceil(b[2]), 0, w)),
        int(np.clip(math.ceil(b[3]), 0, h)),
    )


def _union(boxes: Sequence[Box]) -> Box:
    a = np.asarray(boxes, np.float64)
    return float(a[:, 0].min()), float(a[:, 1].min()), float(a[:, 2].max()), float(a[:, 3].max())


#: a reading direction on the rendered page -> the quarter turn taking it to "left to right" (and back): text
#: running down (a page turned or a label set sideways) is grouped as if it ran left to right
_TURNS: dict[int, tuple[np.ndarray, np.ndarray]] = {
    0: (np.eye(2), np.eye(2)),  # right
    1: (np.array([[0.0, 1.0], [-1.0, 0.0]]), np.array([[0.0, -1.0], [1.0, 0.0]])),  # down
    2: (-np.eye(2), -np.eye(2)),  # left
    3: (np.array([[0.0, -1.0], [1.0, 0.0]]), np.array([[0.0, 1.0], [-1.0, 0.0]])),  # up
}


def _turn(box: Box, m: np.ndarray) -> Box:
    xy = np.array([[box[0], box[1]], [box[2], box[3]]]) @ m.T
    return float(xy[:, 0].min()), float(xy[:, 1].min()), float(xy[:, 0].max()), float(xy[:, 1].max())


def _direction(affine: np.ndarray, angle: float) -> int:
    """The reading direction on the rendered page (0 right, 1 down, 2 left, 3 up) of a character PDFium gives the
    angle ``angle`` (radians, clockwise in user space)."""
    dx, dy = affine[:, :2] @ np.array([math.cos(angle), -math.sin(angle)])
    return (0 if dx > 0 else 2) if abs(dx) >= abs(dy) else (1 if dy > 0 else 3)


Char = tuple[str, "Box | None", int]


def _chars(page: Any, affine: np.ndarray) -> list[Char]:
    """Every character of the page's text page in content order: text, pixel box (``None`` for a space or a line
    break PDFium generated) and reading direction (a space takes the previous character's)."""
    import pypdfium2.raw as pdfium_c

    textpage = page.get_textpage()
    try:
        out: list[Char] = []
        direction = 0
        for i in range(textpage.count_chars()):
            code = pdfium_c.FPDFText_GetUnicode(textpage.raw, i)
            ch = chr(code) if 0 < code < 0x110000 else " "
            if ch in _SPACES or ch.isspace():
                out.append((" " if ch not in "\r\n" else "\n", None, direction))
                continue
            angle = float(pdfium_c.FPDFText_GetCharAngle(textpage.raw, i))
            direction = _direction(affine, angle if angle >= 0 else 0.0)
            box = map_box(affine, textpage.get_charbox(i, loose=True))
            out.append((ch, box if box[2] > box[0] and box[3] > box[1] else None, direction))
        return out
    finally:
        textpage.close()


def _words(chars: list[tuple[str, Box | None]]) -> list[tuple[str, Box, bool]]:
    """(text, box, starts a new line) per word of characters running left to right: characters between spaces,
    split where a character jumps away from the previous one (a new line or column without a space between)."""
    words: list[tuple[str, Box, bool]] = []
    text, newline, pending_break = "", False, False
    boxes: list[Box] = []

    def flush() -> None:
        nonlocal text, boxes, newline
        if text and boxes:
            words.append((text, _union(boxes), newline))
        text, boxes, newline = "", [], False

    for ch, box in chars:
        if box is None:
            flush()
            pending_break = pending_break or ch == "\n"
            continue
        if boxes:
            prev = boxes[-1]
            height = max(prev[3] - prev[1], box[3] - box[1], 1e-6)
            same_row = min(prev[3], box[3]) - max(prev[1], box[1]) > 0.3 * height
            if not same_row or box[0] - prev[2] > GAP_SPLIT * height or box[2] < prev[0]:
                flush()
        if not boxes:
            newline, pending_break = pending_break, False
        text += ch
        boxes.append(box)
    flush()
    return words


def _group(words: list[tuple[str, Box, bool]]) -> list[list[tuple[str, Box]]]:
    """Words running left to right (in content order) into lines: a word joins the current line when it is on the
    same row (vertical overlap of at least half the smaller height), to the right of it, and no wider a gap than
    :data:`GAP_SPLIT` line heights."""
    lines: list[list[tuple[str, Box]]] = []
    for text, box, newline in words:
        if lines and not newline:
            cur = _union([b for _, b in lines[-1]])
            h = min(cur[3] - cur[1], box[3] - box[1])
            overlap = min(cur[3], box[3]) - max(cur[1], box[1])
            gap = box[0] - cur[2]
            if overlap >= 0.5 * h and -0.5 * h <= gap <= GAP_SPLIT * (cur[3] - cur[1]):
                lines[-1].append((text, box))
                continue
        lines.append([(text, box)])
    return lines


def group_lines(chars: list[Char], width: int, height: int) -> list[OcrLine]:
    """Characters (pixel boxes, content order) into the text group's lines, per reading direction: each direction's
    characters turned to run left to right, grouped into words and lines, turned back.  Lines sorted as OCR's are:
    top to bottom, then left to right."""
    out = []
    for direction, (to, back) in _TURNS.items():
        mine = [(ch, None if b is None else _turn(b, to)) for ch, b, d in chars if d == direction]
        if not any(b is not None for _, b in mine):
            continue
        for ws in _group(_words(mine)):
            box = _pixel_box(_turn(_union([b for _, b in ws]), back), width, height)
            if box[2] <= box[0] or box[3] <= box[1]:
                continue
            words_ = tuple(OcrWord(t, _pixel_box(_turn(b, back), width, height), 1.0) for t, b in ws)
            out.append(OcrLine(" ".join(t for t, _ in ws), box, 1.0, words_))
    out.sort(key=lambda ln: (ln.box[1] + ln.box[3], ln.box[0]))
    return out


def _image_cover(page: Any, area: float) -> float:
    """Share of the page's area under its image objects (summed; at most 1)."""
    import pypdfium2.raw as pdfium_c

    total = 0.0
    for obj in page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_IMAGE], max_depth=2):
        left, bottom, right, top = obj.get_bounds()
        total += max(right - left, 0.0) * max(top - bottom, 0.0)
    return min(total / area, 1.0) if area > 0 else 0.0


def page_lines(page: Any, width_px: int, height_px: int) -> list[OcrLine] | None:
    """The text layer of a pypdfium2 page as lines in pixels of its render at ``width_px`` x ``height_px``;
    ``None`` when the page has no text layer (or is a scan with a few stamped characters): OCR it."""
    bbox = page.get_bbox()
    affine = page_affine(bbox, page.get_rotation(), width_px, height_px)
    chars = _chars(page, affine)
    visible = sum(1 for _, b, _ in chars if b is not None)
    if visible == 0:
        return None
    if visible < SCAN_MAX_CHARS:
        area = (bbox[2] - bbox[0]) * (bbox[3] - bbox[1])
        if _image_cover(page, area) >= 0.5:
            return None
    lines = group_lines(chars, width_px, height_px)
    return lines or None
