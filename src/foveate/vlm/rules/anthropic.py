"""Anthropic: Claude's area rule, read as a cap on 28-px patches."""

from __future__ import annotations

import numpy as np

from ...core.types import I64
from ..formats import ANTHROPIC_MESSAGES
from .base import Arr, VlmRule


class Anthropic(VlmRule):
    """Claude (3 and 4 families).  Source: docs.anthropic.com/en/docs/build-with-claude/vision ("Evaluate image
    size", "Calculate image costs"): tokens = width * height / 750; a picture whose long edge is over 1568 px, or
    that is over ~1,600 tokens, is first scaled down, keeping its aspect ratio, until it is within the limits; a
    table lists the largest sizes that are *not* resized: 1092 x 1092 (1:1), 951 x 1268 (3:4), 896 x 1344 (2:3),
    819 x 1456 (9:16), 784 x 1568 (1:2); worked costs: 200 x 200 ~ 54 tokens, 1000 x 1000 ~ 1334, 1092 x 1092 ~
    1590.  Limits: 100 pictures per API request (200k-context models), 8000 x 8000 px each.

    Ambiguous: "~1,600 tokens" as an area cap (w h / 750 <= 1600) contradicts the document's own table (951 x 1268
    is 1,608 tokens, 784 x 1568 is 1,639, and neither is resized).  The reading that reproduces every row of the
    table exactly is a cap of 1568 patches of 28 x 28 px (ceil(w/28) * ceil(h/28) <= 1568: 1092 = 39 x 28 is the
    largest square) with the long edge <= 1568; the code follows it, scaling down by the largest factor that meets
    both.  Billing follows the documented formula, rounded up (1000 x 1000 -> 1334, 200 x 200 -> 54)."""

    name = "anthropic"
    format = ANTHROPIC_MESSAGES
    default_model = "claude-sonnet-4-5"
    max_pictures = 100
    max_side = 8000
    source = "https://docs.anthropic.com/en/docs/build-with-claude/vision"
    long_edge = 1568
    max_patches = 1568
    patch = 28

    def _fits(self, w: Arr, h: Arr) -> Arr:
        p = self.patch
        out: Arr = (np.maximum(w, h) <= self.long_edge) & ((-(-w // p)) * (-(-h // p)) <= self.max_patches)
        return out

    def price(self, w: Arr, h: Arr, option: str | None = None) -> tuple[I64, I64, I64]:
        w0, h0 = np.asarray(w, np.int64), np.asarray(h, np.int64)
        wf, hf = w0.astype(np.float64), h0.astype(np.float64)
        s = np.minimum(
            1.0, np.minimum(self.long_edge / np.maximum(wf, hf), np.sqrt(self.max_patches * self.patch**2 / (wf * hf)))
        )
        sw = np.maximum(1, np.floor(wf * s + 1e-6)).astype(np.int64)
        sh = np.maximum(1, np.floor(hf * s + 1e-6)).astype(np.int64)
        bad = ~self._fits(sw, sh)
        while bad.any():  # the area bound ignores the patch round-up: shrink one px on the long side at a time
            long = np.maximum(wf, hf)
            s = np.where(bad, s * (1.0 - 1.0 / long), s)
            sw = np.where(bad, np.maximum(1, np.floor(wf * s + 1e-6)), sw).astype(np.int64)
            sh = np.where(bad, np.maximum(1, np.floor(hf * s + 1e-6)), sh).astype(np.int64)
            bad = ~self._fits(sw, sh)
        return -(-(sw * sh) // 750), sw, sh
