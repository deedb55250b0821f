"""Is there text?  The OCR detector on a small copy decides whether an image is worth reading; if it is, the OCR
reads it exactly as full-page OCR does.

Full-page OCR (``ocr="always"``) runs the detector on the whole image at the scale rapidocr chooses (the short side
brought to at least 736 px: a 640x480 photo is read at 992x736) -- ~0.2 s on a 2-core CPU whether or not the image
holds any text -- and then recognises every line it finds.  The gate (``ocr="auto"``, the default):

0. reads a page whole at once: where at least :data:`PAGE_PAPER_SHARE` of a small grey copy is paper (grey level
   :data:`PAPER_GREY` or more) and some of it ink (:data:`PAGE_INK_SHARE` darker than :data:`INK_GREY`), the steps
   below could only say "text" (a scanned form, a letter: ~90 ms saved a page).  On the shared sets it takes 79
   of 89 FUNSD pages, 25 of 236 receipts and no COCO photo, DAVIS or bedroom video frame (BENCHMARKS.md);
1. runs the same detection network on a copy whose long side is at most :data:`GATE_SIDE` px (~70 ms for a photo):
   a per-pixel text probability map;
2. a blob of probability >= :data:`GATE_THRESHOLD` counts as text where the copy has ink: its strongest grey-level
   step between neighbouring pixels reaches :data:`GATE_MIN_STEP` (the network also answers 0.2-0.5 on blank or
   smoothly shaded areas);
3. no such blob: the image has no text -- nothing is detected or recognised;
4. otherwise each blob's window (the blob grown by :data:`WINDOW_MARGIN`, windows that meet merged; line-like ones
   first, then the smallest) is read at the full pass's scale by the same detector and recogniser, until one reads
   a line at the OCR's own confidence threshold: then the OCR runs on the whole image, as full-page OCR -- the same
   lines, read the same.  No window reads a line: no text.  A lone glyph counts only at :data:`LONE_GLYPH_SCORE`:
   it is what the recogniser makes of a photo's texture (``V``, ``A``, a single Chinese character at 0.56-0.79 on
   the shared photos), where a printed letter reads at ~1.0.  The network rates many a photo's blobs as text (a
   fence, foliage, a tiled floor) where full-page OCR then keeps nothing; the windows find that out for ~10-100 ms
   instead of the full pass's ~200 ms, and let steps 1-2 be more sensitive (the threshold and step below are half
   those of a gate without step 4) for no more passes over text-free photos.

The windows only decide; their lines are not kept.  Detecting only in windows does not give the same lines: the
detector's answer at a pixel depends on context across the whole image (see the blank-image response above), so
windows move boxes by a pixel or two and the recognizer -- which reads each line in a batch padded to its
neighbours -- then reads ~45 % of a photo's lines differently (``foveate bench --folder`` on that variant, not kept
and not recorded in BENCHMARKS.md).  What the gate costs is the text it does not see: print a few pixels high once
the copy is shrunk, or a faint fragment the full-scale detector reads into a texture.  The constants were chosen on
the shared photo and form sets (their line recall and the photos skipped: BENCHMARKS.md, "Encode against the OCR
engine alone"; what the gate missed before step 4: docs/lab/journal.md, "OCR only where there is text").
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..._lazy import lazy_module

cv2 = lazy_module("cv2")

#: long side (px) of the copy the gate runs the detector on (rounded to the network's 32 px grid; never enlarged)
GATE_SIDE = 576
#: text probability at or above which a pixel of the gate's map counts as text
GATE_THRESHOLD = 0.1
#: a blob counts only where the copy has ink: its strongest step between neighbouring pixels, in grey levels
GATE_MIN_STEP = 32
#: margin (px of the gate's copy) around the blobs: the windows read in step 4
WINDOW_MARGIN = 8
#: windows are cut on this grid of the full pass's scale, so that the detector sees few input shapes (OpenVINO
#: prepares its kernels once per shape)
WINDOW_GRID = 64
#: a window's reading of one character (spaces not counted) decides "text" only at this confidence or more
LONE_GLYPH_SCORE = 0.9
#: step 0 (:func:`looks_like_page`): the share of paper, the grey levels of paper and ink, and the share of ink
PAGE_PAPER_SHARE = 0.75
PAPER_GREY = 200
INK_GREY = 110
PAGE_INK_SHARE = 0.001
#: the long side (px) of step 0's grey copy
PAGE_SIDE = 256
_GRID = 32


@dataclass
class GateResult:
    """What the gate decided for one image.

    Attributes:
        detector: ``"none"`` (no text: no full-page pass) or ``"full"`` (the detector ran on the whole image, as
            full-page OCR).
        blobs: the blobs that counted as text on the gate's copy.
        share: the share of the gate's copy those blobs cover.
        windows: the blobs' windows read (step 4) before deciding.
        reading: the first line a window read at the OCR's confidence (why the image is read whole); ``""`` if none.
        ms: time spent deciding (the small copy, the blobs and the windows), milliseconds.
        page: read whole at step 0 (:func:`looks_like_page`): no small copy, no windows.
    """

    detector: str
    blobs: int = 0
    share: float = 0.0
    windows: int = 0
    reading: str = ""
    ms: float = 0.0
    page: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "detector": self.detector,
            "blobs": self.blobs,
            "share": round(self.share, 4),
            "windows": self.windows,
            "reading": self.reading,
            "ms": round(self.ms, 2),
            "page": self.page,
            "side": GATE_SIDE,
            "threshold": GATE_THRESHOLD,
            "min_step": GATE_MIN_STEP,
        }


def _normalise(pre: Any, bgr: np.ndarray) -> np.ndarray:
    """rapidocr's detector input for already resized pixels, computed as its ``DetPreProcess`` does."""
    return np.expand_dims(pre.permute(pre.normalize(bgr)), axis=0).astype(np.float32)


def ink_mask(det: Any, img: np.ndarray) -> tuple[np.ndarray, int]:
    """The blobs of the detector's probability map on a copy of ``img`` (BGR) whose long side is :data:`GATE_SIDE`
    that count as text (see the module docstring): a boolean mask of the copy, and how many blobs it holds."""
    h, w = img.shape[:2]
    s = min(1.0, GATE_SIDE / max(h, w))
    sh, sw = max(_GRID, int(round(h * s / _GRID)) * _GRID), max(_GRID, int(round(w * s / _GRID)) * _GRID)
    small = cv2.resize(img, (sw, sh), interpolation=cv2.INTER_AREA)
    prob = det.session(_normalise(det.get_preprocess(), small))[0, 0]
    n, labels, stats, _ = cv2.connectedComponentsWithStats((prob >= GATE_THRESHOLD).astype(np.uint8), connectivity=8)
    if n <= 1:
        return np.zeros((sh, sw), bool), 0
    grey = cv2.cvtColor(small, cv2.COLOR_BGR2GRAY).astype(np.int16)
    step = np.zeros(grey.shape, np.int16)
    np.maximum(step[:, 1:], np.abs(np.diff(grey, axis=1)), out=step[:, 1:])
    np.maximum(step[1:, :], np.abs(np.diff(grey, axis=0)), out=step[1:, :])
    inked = np.zeros(n, bool)
    for i, (x, y, bw, bh, _) in enumerate(stats[1:], start=1):
        inked[i] = step[y : y + bh, x : x + bw].max() >= GATE_MIN_STEP
    return inked[labels], int(inked.sum())


def text_blobs(det: Any, img: np.ndarray) -> tuple[int, float]:
    """``(blobs, share)``: the inked blobs of :func:`ink_mask` and the share of the gate's copy they cover."""
    mask, blobs = ink_mask(det, img)
    return blobs, float(mask.mean())


def windows(mask: np.ndarray, full_shape: tuple[int, int]) -> list[tuple[int, int, int, int]]:
    """The blobs of ``mask`` (the gate's copy) grown by :data:`WINDOW_MARGIN` and merged where they meet, as
    ``(x0, y0, x1, y1)`` windows of an image of ``full_shape`` (h, w) cut on :data:`WINDOW_GRID`: those at least
    twice as wide as high first (a line: on a page the first window read holds one), then the smallest."""
    sh, sw = mask.shape
    h, w = full_shape
    k = 2 * WINDOW_MARGIN + 1
    grown = cv2.dilate(mask.astype(np.uint8), np.ones((k, k), np.uint8))
    n, _, stats, _ = cv2.connectedComponentsWithStats(grown, connectivity=8)
    out = []
    for x, y, bw, bh, _ in stats[1:]:
        x0, y0, x1, y1 = x * w // sw, y * h // sh, -(-(x + bw) * w // sw), -(-(y + bh) * h // sh)
        ww, hh = min(w, -(-(x1 - x0) // WINDOW_GRID) * WINDOW_GRID), min(h, -(-(y1 - y0) // WINDOW_GRID) * WINDOW_GRID)
        x0, y0 = max(0, min(x0 - (ww - (x1 - x0)) // 2, w - ww)), max(0, min(y0 - (hh - (y1 - y0)) // 2, h - hh))
        out.append((int(x0), int(y0), int(x0 + ww), int(y0 + hh)))
    return sorted(out, key=lambda b: (b[2] - b[0] < 2 * (b[3] - b[1]), (b[2] - b[0]) * (b[3] - b[1])))


def line_crops(det: Any, window: np.ndarray) -> list[np.ndarray]:
    """The lines rapidocr's detector finds in ``window`` (BGR, at the full pass's scale), cut out as its pipeline
    cuts them for the recogniser."""
    from rapidocr.utils.process_img import get_rotate_crop_image

    h, w = window.shape[:2]
    padded = cv2.copyMakeBorder(window, 0, -h % _GRID, 0, -w % _GRID, cv2.BORDER_CONSTANT)
    boxes, _ = det.postprocess_op(det.session(_normalise(det.get_preprocess(), padded)), padded.shape[:2])
    return [get_rotate_crop_image(padded, np.asarray(b, np.float32)) for b in boxes]


def first_reading(engine: Any, crops: list[np.ndarray]) -> str:
    """The first of ``crops`` the recogniser reads at the engine's confidence threshold (``Global.text_score``, as
    full-page OCR keeps a line; a lone glyph at :data:`LONE_GLYPH_SCORE`), or ``""``."""
    from rapidocr.ch_ppocr_rec import TextRecInput

    res = engine._load_rec_model()(TextRecInput(img=crops, return_word_box=False))
    floor = float(engine.cfg.Global.text_score)
    for text, score in zip(res.txts, res.scores):
        chars = len("".join(str(text).split()))
        if score >= floor and (chars > 1 or (chars == 1 and score >= LONE_GLYPH_SCORE)):
            return str(text).strip()
    return ""


def looks_like_page(img: np.ndarray) -> bool:
    """Step 0: whether ``img`` (BGR) is mostly paper with some ink on a :data:`PAGE_SIDE`-px grey copy."""
    h, w = img.shape[:2]
    s = min(1.0, PAGE_SIDE / max(h, w))
    small = cv2.resize(img, (max(1, round(w * s)), max(1, round(h * s))), interpolation=cv2.INTER_AREA)
    small = cv2.cvtColor(small, cv2.COLOR_BGR2GRAY)
    return bool((small >= PAPER_GREY).mean() >= PAGE_PAPER_SHARE and (small < INK_GREY).mean() >= PAGE_INK_SHARE)


def gate_text(engine: Any, img: np.ndarray) -> GateResult:
    """Decide whether ``img`` (BGR) has text, with the rapidocr engine ``engine``: detector ``"full"`` (read the
    whole image) or ``"none"``."""
    t0 = time.perf_counter()
    if looks_like_page(img):
        return GateResult("full", ms=(time.perf_counter() - t0) * 1000.0, page=True)
    det = engine._load_det_model()
    mask, blobs = ink_mask(det, img)
    checked, reading = 0, ""
    if blobs:
        big = det.get_preprocess().resize(engine.preprocess_img(img)[0])  # the full pass's scale
        for x0, y0, x1, y1 in windows(mask, big.shape[:2]) if big is not None else ():
            checked += 1
            crops = line_crops(det, big[y0:y1, x0:x1])
            reading = first_reading(engine, crops) if crops else ""
            if reading:
                break
    ms = (time.perf_counter() - t0) * 1000.0
    return GateResult("full" if reading else "none", blobs, float(mask.mean()), checked, reading, ms)
