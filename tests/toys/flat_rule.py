"""A toy VLM rule: a model that resizes every picture to fit 448 x 448 and bills a flat 100 tokens per picture (the
shape of Gemini 3's per-picture price)."""

from __future__ import annotations

import numpy as np

from foveate.vlm.formats import GEMINI_CONTENTS
from foveate.vlm.rules.base import VlmRule


class FlatRule(VlmRule):
    name = "flat"
    format = GEMINI_CONTENTS
    default_model = "flat-model"
    source = "a test's own rule: 100 tokens per picture, seen within 448 x 448"

    def price(self, w, h, option=None):
        w, h = np.asarray(w, np.float64), np.asarray(h, np.float64)
        s = np.minimum(1.0, 448.0 / np.maximum(w, h))
        return (
            np.full(w.shape, 100, np.int64),
            np.maximum(1, np.floor(w * s)).astype(np.int64),
            np.maximum(1, np.floor(h * s)).astype(np.int64),
        )
