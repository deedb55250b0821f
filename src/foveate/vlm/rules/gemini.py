"""Google Gemini: 2.x bills 258 tokens per 768-px tile; Gemini 3 a fixed count per picture, by the picture's
``media_resolution`` level."""

from __future__ import annotations

import numpy as np

from ...core.errors import ConfigError
from ...core.types import I64
from ..formats import GEMINI_CONTENTS
from .base import Arr, VlmRule

MEDIA_RESOLUTION = "https://ai.google.dev/gemini-api/docs/media-resolution"


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
    source = "https://ai.google.dev/gemini-api/docs/tokens (read 2026-11-27)"

    def price(self, w: Arr, h: Arr, option: str | None = None) -> tuple[I64, I64, I64]:
        w, h = np.asarray(w, np.int64), np.asarray(h, np.int64)
        small = (w <= 384) & (h <= 384)
        tiles = np.where(small, 1, (-(-w // 768)) * (-(-h // 768)))
        return 258 * tiles, w.copy(), h.copy()


#: Gemini 3: media_resolution level -> tokens per image, whatever its size (the media-resolution page's table, read
#: 2026-11-27: LOW 280, MEDIUM 560, HIGH 1120, ULTRA_HIGH 2240 "(Per part only)"; the default is HIGH's 1120)
GEMINI3_LEVELS = {"high": 1120, "low": 280, "medium": 560, "ultra_high": 2240}
#: the pixels a level's tokens keep (the reading this code takes, see :class:`Gemini3`): 32 x 32 px per token
GEMINI3_PIXELS_PER_TOKEN = 32 * 32


class Gemini3(VlmRule):
    """Gemini 3.  Source: ai.google.dev/gemini-api/docs/media-resolution (read 2026-11-27): ``media_resolution``
    "determines the maximum number of tokens allocated per input image": 280 (``MEDIA_RESOLUTION_LOW``), 560
    (``MEDIUM``), 1120 (``HIGH``, and the default when unspecified) or 2240 (``ULTRA_HIGH``, "Per part only") per
    image, whatever its size; "Setting media_resolution on individual Part objects is exclusive to Gemini 3 models"
    and "the per-part setting takes precedence" over the request's.  So each picture of a plan carries its own level
    (:attr:`options`; the body sets it per part).  Limits (image-understanding page): 3,600 images per request.

    Ambiguous: the pages give tokens, not the pixels a level keeps (measured counts are slightly under the table:
    1089 at the default on one model, so the table is read as the bill).  The code reads a level as keeping a
    picture at up to ``tokens x 32 x 32`` pixels (shrunk, aspect kept, never enlarged): 1120 tokens keep about
    1.15 MP.  That is the least detail among the plausible readings -- Gemini 2.x keeps 768 x 768 px per 258 tokens,
    twice as many pixels per token -- so a plan never claims that a crop is seen sharper than it may be."""

    name = "gemini-3"
    format = GEMINI_CONTENTS
    default_model = "gemini-3-flash-preview"
    options = tuple(GEMINI3_LEVELS)
    max_pictures = 3600
    source = f"{MEDIA_RESOLUTION} (read 2026-11-27)"

    def price(self, w: Arr, h: Arr, option: str | None = None) -> tuple[I64, I64, I64]:
        level = option or self.options[0]
        if level not in GEMINI3_LEVELS:
            raise ConfigError(f"gemini-3: media_resolution must be one of {', '.join(GEMINI3_LEVELS)}, got {option!r}")
        tokens = GEMINI3_LEVELS[level]
        w, h = np.asarray(w, np.float64), np.asarray(h, np.float64)
        s = np.minimum(1.0, np.sqrt(tokens * GEMINI3_PIXELS_PER_TOKEN / (w * h)))
        sw = np.maximum(1, np.floor(w * s + 1e-6)).astype(np.int64)
        sh = np.maximum(1, np.floor(h * s + 1e-6)).astype(np.int64)
        return np.full(w.shape, tokens, np.int64), sw, sh
