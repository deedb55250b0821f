"""OpenAI: the GPT-4o family's 512-px tile rule and the 32-px patch rule of the newer small models."""

from __future__ import annotations

import numpy as np

from ...core.errors import ConfigError
from ...core.types import I64
from .base import Arr, VlmRule, _fit_inside

#: (base, per 512-px tile) tokens of the tile-rule models.  Source: OpenAI, "Images and vision", calculating costs
#: (platform.openai.com/docs/guides/images-vision#calculating-costs).
OPENAI_TILE_MODELS = {
    "gpt-4o": (85, 170),
    "gpt-4.1": (85, 170),
    "gpt-4.5": (85, 170),
    "gpt-4o-mini": (2833, 5667),
    "o1": (75, 150),
    "o1-pro": (75, 150),
    "o3": (75, 150),
}

#: token multiplier of the 32-px patch-rule models (same source)
OPENAI_PATCH_MODELS = {"gpt-4.1-mini": 1.62, "gpt-4.1-nano": 2.46, "o4-mini": 1.72}


class OpenAITiles(VlmRule):
    """GPT-4o family (``detail: high`` / ``low``).  Source: platform.openai.com/docs/guides/images-vision
    ("Calculating costs"): *low* costs the base tokens and the model sees a 512 x 512 version; *high* scales the
    picture to fit in 2048 x 2048, then so that its shortest side is 768 px, and bills the base plus one tile per
    512-px square.  Worked examples there: 1024 x 1024 high = 765 tokens (768 x 768, 4 tiles); 2048 x 4096 high =
    1105 (768 x 1536, 6 tiles); 4096 x 8192 low = 85.  Limits (same guide): up to 500 pictures per request, 20 MB
    per picture.

    Ambiguous: whether a picture whose shortest side is under 768 px is scaled *up* to 768.  The code reads both
    steps as shrink-only: every worked example in the guide is a shrink, the guide's size limits name 768 px as a
    maximum ("768px (short side) x 2000px (long side)"), and bills reported on OpenAI's forum (500 x 500 -> 255
    tokens, 513 x 500 -> 425) match it, where an upscale would bill 765 for both.  Sides after a resize are rounded
    down (the guide does not say; a forum measurement of 1025 px -> 513 px shows a round-down).  *low*: a picture
    already within 512 x 512 is read as seen at its own size (the guide does not say it is padded or scaled up)."""

    options = ("high", "low")
    max_pictures = 500
    source = "https://platform.openai.com/docs/guides/images-vision#calculating-costs"

    def __init__(self, model: str = "gpt-4o") -> None:
        if model not in OPENAI_TILE_MODELS:
            raise ConfigError(
                f"openai: unknown model {model!r}; tile-rule models: {', '.join(OPENAI_TILE_MODELS)} "
                f"(32-px patch models use openai-patch:MODEL)"
            )
        self.base, self.tile = OPENAI_TILE_MODELS[model]
        self.default_model = model
        self.name = "openai" if model == "gpt-4o" else f"openai:{model}"

    def price(self, w: Arr, h: Arr, option: str | None = None) -> tuple[I64, I64, I64]:
        if (option or "high") == "low":
            sw, sh = _fit_inside(w, h, 512, 512)
            return np.full(np.shape(sw), self.base, np.int64), sw, sh
        if option not in (None, "high"):
            raise ConfigError(f"openai: detail must be high or low, got {option!r}")
        sw, sh = _fit_inside(w, h, 2048, 2048)
        short = np.minimum(sw, sh).astype(np.float64)
        s = np.minimum(1.0, 768.0 / short)
        sw = np.maximum(1, np.floor(sw * s + 1e-6)).astype(np.int64)
        sh = np.maximum(1, np.floor(sh * s + 1e-6)).astype(np.int64)
        tiles = (-(-sw // 512)) * (-(-sh // 512))
        return self.base + self.tile * tiles, sw, sh


class OpenAIPatches(VlmRule):
    """GPT-4.1-mini / -nano, o4-mini: 32 x 32 px patches, at most 1536.  Source: platform.openai.com/docs/guides/
    images-vision ("Calculating costs", patch models): patches = ceil(w/32) * ceil(h/32); over 1536 the picture is
    shrunk by sqrt(1536 * 32^2 / (w h)), then by floor(w'/32) / (w'/32) so that its width is a whole number of
    patches; the count is capped at 1536 and multiplied by the model's factor (1.62 gpt-4.1-mini, 2.46
    gpt-4.1-nano, 1.72 o4-mini).  Worked examples there: 1024 x 1024 = 1024 patches; 1800 x 2400 -> 1056 x 1408 =
    1452 patches.  The guide does not say how the product with the factor is rounded: the code rounds up.  A
    rule of its own: the ``detail`` parameter does not change these models' count in the guide."""

    max_pictures = 500
    source = "https://platform.openai.com/docs/guides/images-vision#calculating-costs"
    cap = 1536
    patch = 32

    def __init__(self, model: str = "gpt-4.1-mini") -> None:
        if model not in OPENAI_PATCH_MODELS:
            raise ConfigError(
                f"openai-patch: unknown model {model!r}; patch-rule models: {', '.join(OPENAI_PATCH_MODELS)}"
            )
        self.multiplier = OPENAI_PATCH_MODELS[model]
        self.default_model = model
        self.name = "openai-patch" if model == "gpt-4.1-mini" else f"openai-patch:{model}"

    def price(self, w: Arr, h: Arr, option: str | None = None) -> tuple[I64, I64, I64]:
        p, cap = self.patch, self.cap
        w = np.asarray(w, np.float64)
        h = np.asarray(h, np.float64)
        over = np.ceil(w / p) * np.ceil(h / p) > cap
        s = np.where(over, np.minimum(1.0, np.sqrt(cap * p * p / (w * h))), 1.0)
        w1, h1 = w * s, h * s
        f = np.where(over, np.floor(w1 / p) / np.maximum(w1 / p, 1e-9), 1.0)
        f = np.where(f > 0, f, 1.0)  # a picture narrower than one patch after the shrink keeps its width
        w2, h2 = w1 * f, h1 * f
        patches = np.minimum(np.ceil(w2 / p - 1e-9) * np.ceil(h2 / p - 1e-9), cap)
        tokens = np.ceil(patches * self.multiplier - 1e-9).astype(np.int64)
        return (tokens, np.maximum(1, np.round(w2)).astype(np.int64), np.maximum(1, np.round(h2)).astype(np.int64))
