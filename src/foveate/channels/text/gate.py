"""Is there text?  The OCR detector on a small copy decides whether an image is worth reading; if it is, the OCR
reads it exactly as full-page OCR does.

Full-page OCR (``ocr="always"``) runs the detector on the whole image at the scale rapidocr chooses (the short side
brought to at least 736 px: a 640x480 photo is read at 992x736) -- ~0.2 s on a 2-core CPU whether or not the image
holds any text -- and then recognises every line it finds.  The gate (``ocr="auto"``, the default):

1. runs the same detection network on a copy whose long side is at most :data:`GATE_SIDE` px (~70 ms for a photo):
   a per-pixel text probability map;
2. a blob of probability >= :data:`GATE_THRESHOLD` counts as text where the copy has ink: its strongest grey-level
   step between neighbouring pixels reaches :data:`GATE_MIN_STEP` (the network also answers 0.2-0.5 on blank or
   smoothly shaded areas);
3. no such blob: the image has no text -- nothing is detected or recognised; otherwise the OCR runs on the whole
   image, as full-page OCR: the same lines, read the same.

Detecting only in the blobs' windows of the full-resolution input, the obvious next saving, does not give the same
lines: the detector's answer at a pixel depends on context across the whole image (see the blank-image response
above), so windows move boxes by a pixel or two and the recognizer -- which reads each line in a batch padded to
its neighbours -- then reads ~45 % of a photo's lines differently (``foveate bench --folder`` on that variant, not
kept and not recorded in BENCHMARKS.md).  What the gate costs is the text it does not see: print a few pixels
high once the copy is shrunk, or a faint fragment the full-scale detector reads into a texture.  The constants were
chosen on the shared photo and form sets (their line recall: BENCHMARKS.md, "OCR only where there is text, and a
light import"; what the gate misses at any threshold: docs/lab/journal.md, "OCR only where there is text").
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
GATE_THRESHOLD = 0.2
#: a blob counts only where the copy has ink: its strongest step between neighbouring pixels, in grey levels
GATE_MIN_STEP = 48
_GRID = 32


@dataclass
class GateResult:
    """What the gate decided for one image.

    Attributes:
        detector: ``"none"`` (no text: nothing detected or recognised) or ``"full"`` (the detector ran on the whole
            image, as full-page OCR).
        blobs: the blobs that counted as text on the gate's copy.
        share: the share of the gate's copy those blobs cover.
        ms: time spent deciding (the detector on the small copy and the blobs), milliseconds.
    """

    detector: str
    blobs: int = 0
    share: float = 0.0
    ms: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "detector": self.detector,
            "blobs": self.blobs,
            "share": round(self.share, 4),
            "ms": round(self.ms, 2),
            "side": GATE_SIDE,
            "threshold": GATE_THRESHOLD,
            "min_step": GATE_MIN_STEP,
        }


def _normalise(pre: Any, bgr: np.ndarray) -> np.ndarray:
    """rapidocr's detector input for already resized pixels, computed as its ``DetPreProcess`` does."""
    return np.expand_dims(pre.permute(pre.normalize(bgr)), axis=0).astype(np.float32)


def text_blobs(det: Any, img: np.ndarray) -> tuple[int, float]:
    """``(blobs, share)``: the blobs of the detector's probability map on a copy of ``img`` (BGR) whose long side is
    :data:`GATE_SIDE`, that count as text (see the module docstring), and the share of the copy they cover."""
    h, w = img.shape[:2]
    s = min(1.0, GATE_SIDE / max(h, w))
    sh, sw = max(_GRID, int(round(h * s / _GRID)) * _GRID), max(_GRID, int(round(w * s / _GRID)) * _GRID)
    small = cv2.resize(img, (sw, sh), interpolation=cv2.INTER_AREA)
    prob = det.session(_normalise(det.get_preprocess(), small))[0, 0]
    n, _, stats, _ = cv2.connectedComponentsWithStats((prob >= GATE_THRESHOLD).astype(np.uint8), connectivity=8)
    if n <= 1:
        return 0, 0.0
    grey = cv2.cvtColor(small, cv2.COLOR_BGR2GRAY).astype(np.int16)
    step = np.zeros(grey.shape, np.int16)
    np.maximum(step[:, 1:], np.abs(np.diff(grey, axis=1)), out=step[:, 1:])
    np.maximum(step[1:, :], np.abs(np.diff(grey, axis=0)), out=step[1:, :])
    inked = [area for x, y, bw, bh, area in stats[1:] if step[y : y + bh, x : x + bw].max() >= GATE_MIN_STEP]
    return len(inked), float(sum(inked)) / (sh * sw)


def gate_text(det: Any, img: np.ndarray) -> GateResult:
    """Decide whether ``img`` (BGR) has text, with rapidocr's ``TextDetector`` ``det``: detector ``"full"`` (read the
    whole image) or ``"none"``."""
    t0 = time.perf_counter()
    blobs, share = text_blobs(det, img)
    return GateResult("full" if blobs else "none", blobs, share, (time.perf_counter() - t0) * 1000.0)
