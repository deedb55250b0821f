"""End-to-end OCR check: is the answer text readable in what the VLM would see?  :func:`answer_found` is a
normalised, location-aware match of ``answer_text`` in what an OCR reads from the mosaic, the full image and the
uniform image (needs ``foveate.query.text``; otherwise the column is reported as unavailable)."""

from __future__ import annotations

import hashlib
import math
import time
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from .data import EvalQuery

#: the methods whose picture is read by OCR: foveate's mosaic, the uniform image, the full image
OCR_METHODS = ("foveate", "uniform", "full")


def normalize_text(text: str) -> str:
    """The matching form of a string: Unicode NFKC, case-folded, letters and digits only (whitespace and
    punctuation dropped, since OCR and annotators disagree on both: "10/ 13/ 99" == "10/13/99")."""
    return "".join(ch for ch in unicodedata.normalize("NFKC", text).casefold() if ch.isalnum())


def substring_edit_distance(pattern: str, text: str) -> int:
    """Fewest edits (insert, delete, substitute) turning ``pattern`` into some substring of ``text``
    (Sellers 1980: Levenshtein with a free start and end in ``text``)."""
    if not pattern:
        return 0
    prev = list(range(len(pattern) + 1))  # column for the empty text prefix
    best = prev[-1]
    for tc in text:
        cur = [0]
        for i, pc in enumerate(pattern, 1):
            cur.append(min(prev[i] + 1, cur[i - 1] + 1, prev[i - 1] + (pc != tc)))
        best = min(best, cur[-1])
        prev = cur
    return best


def _area(b) -> float:
    return max(0.0, b[2] - b[0]) * max(0.0, b[3] - b[1])


def _inter(a, b) -> float:
    return max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]))


def lines_at(lines: Sequence[Any], boxes: Iterable[Sequence[float]], pad: float = 0.25) -> str:
    """The OCR text read at ``boxes``: the lines (objects with ``.text`` and ``.box``) whose box overlaps one
    of the boxes (each grown by ``pad`` x its height on every side) by at least half of the smaller of the two
    areas, in reading order (rows top to bottom, left to right within a row), joined by spaces."""
    grown = []
    for x0, y0, x1, y1 in boxes:
        m = pad * (y1 - y0)
        grown.append((x0 - m, y0 - m, x1 + m, y1 + m))
    picked = [ln for ln in lines if any(_inter(ln.box, g) >= 0.5 * min(_area(ln.box), _area(g)) > 0 for g in grown)]
    picked.sort(key=lambda ln: (ln.box[1] + ln.box[3]) / 2)
    rows: list[list] = []
    for ln in picked:  # same row: vertical centres closer than half the smaller height
        cy, hh = (ln.box[1] + ln.box[3]) / 2, ln.box[3] - ln.box[1]
        if rows:
            last = rows[-1][-1]
            if abs(cy - (last.box[1] + last.box[3]) / 2) < 0.5 * min(hh, last.box[3] - last.box[1]):
                rows[-1].append(ln)
                continue
        rows.append([ln])
    return " ".join(ln.text for row in rows for ln in sorted(row, key=lambda ln: ln.box[0]))


def answer_found(answer: str, read: str, max_error_rate: float = 0.2) -> tuple[bool, bool] | None:
    """Is ``answer`` in the OCR text ``read``?  ``(exact, fuzzy)`` after :func:`normalize_text`: *exact* -- the
    normalised answer is a substring of the normalised text; *fuzzy* -- some substring is within
    ``floor(max_error_rate * len)`` edits (so answers of up to 4 characters must match exactly).  ``None`` when
    the answer has no letter or digit (nothing to read)."""
    a, t = normalize_text(answer), normalize_text(read)
    if not a:
        return None
    exact = a in t
    fuzzy = exact or substring_edit_distance(a, t) <= math.floor(max_error_rate * len(a))
    return exact, fuzzy


def query_answer_found(q: EvalQuery, lines: Sequence[Any], max_error_rate: float = 0.2) -> dict | None:
    """Every answer of ``q`` read at its own box (or at any of the query's boxes): ``{"exact", "fuzzy"}``,
    true when all answers are found; ``None`` when the query has no readable answer text."""
    results = []
    for text, box in q.answers:
        r = answer_found(text, lines_at(lines, [box] if box is not None else q.boxes), max_error_rate)
        if r is not None:
            results.append(r)
    if not results:
        return None
    return {"exact": all(r[0] for r in results), "fuzzy": all(r[1] for r in results)}


def load_ocr() -> tuple[Callable[[np.ndarray], list] | None, str]:
    """``(foveate.query.text.read_text, "")`` when the OCR module is installed, else ``(None, why not)``."""
    try:
        from ..query.text import read_text
    except ImportError as exc:
        return None, f"OCR is not available (foveate.query.text could not be imported: {exc})"
    return read_text, ""


class _Ocr:
    """OCR with a cache keyed by the pixels read (identical mosaics are read once) and error accounting."""

    def __init__(self, fn: Callable[[np.ndarray], list]) -> None:
        self.fn = fn
        self.cache: dict[str, list] = {}
        self.calls, self.seconds = 0, 0.0

    def __call__(self, image: np.ndarray) -> list:
        key = hashlib.sha1(np.ascontiguousarray(image).data).hexdigest() + str(image.shape)
        if key not in self.cache:
            t0 = time.perf_counter()
            self.cache[key] = list(self.fn(image))
            self.seconds += time.perf_counter() - t0
            self.calls += 1
        return self.cache[key]
