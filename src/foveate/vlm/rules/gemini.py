"""Google Gemini 2.x: 258 tokens per 768-px tile."""

from __future__ import annotations

import numpy as np

from ...core.types import I64
from ..formats import GEMINI_CONTENTS
from .base import Arr, VlmRule


class Gemini(VlmRule):
    """Gemini 2.x.  Source: ai.google.dev/gemini-api/docs/tokens ("Multimodal tokens"): a picture with both sides
    <= 384 px is 258 tokens; a larger one is "cropped and scaled as needed into tiles of 768 x 768 pixels, each
    counted as 258 tokens".  Limits (cloud.google.com/vertex-ai/generative-ai/docs/multimodal/image-understanding):
    3,000 pictures per prompt (Gemini 2.5), 7 MB per inline picture.

    Ambiguous: how many tiles a larger picture makes.  The code reads it as the fewest 768-px tiles that cover the
    picture at its own resolution, ceil(w/768) * ceil(h/768), and the picture as seen at its own size: the
    document names no shrink.  (Gemini 3's ``media_resolution`` bills a fixed count per picture and is not this
    rule.)"""

    name = "gemini"
    format = GEMINI_CONTENTS
    default_model = "gemini-2.5-flash"
    max_pictures = 3000
    source = "https://ai.google.dev/gemini-api/docs/tokens"

    def price(self, w: Arr, h: Arr, option: str | None = None) -> tuple[I64, I64, I64]:
        w, h = np.asarray(w, np.int64), np.asarray(h, np.int64)
        small = (w <= 384) & (h <= 384)
        tiles = np.where(small, 1, (-(-w // 768)) * (-(-h // 768)))
        return 258 * tiles, w.copy(), h.copy()
