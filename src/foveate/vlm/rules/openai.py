"""OpenAI: the GPT-4o family's 512-px tile rule and the 32-px patch rule of the newer small models."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...core.errors import ConfigError
from ...core.types import I64
from .base import Arr, VlmRule, _fit_inside

GUIDE = "https://developers.openai.com/api/docs/guides/images-vision"

#: (base, per 512-px tile) tokens of the tile-rule models.  Source: the "Images and vision" guide, "Calculating costs"
#: (read 2026-11-27)
OPENAI_TILE_MODELS = {
    "gpt-4o": (85, 170),
    "gpt-4.1": (85, 170),
    "gpt-4.5": (85, 170),
    "gpt-4o-mini": (2833, 5667),
    "o1": (75, 150),
    "o1-pro": (75, 150),
    "o3": (75, 150),
    "gpt-5": (70, 140),
    "gpt-5.1": (70, 140),
    "gpt-5-chat-latest": (70, 140),
}


@dataclass(frozen=True)
class PatchModel:
    """A patch-rule model: its token multiplier, and per ``detail`` level the pixel limit a picture is fitted in and
    the patch budget (``None``: none), the default level first (what ``auto``, or no detail at all, means)."""

    multiplier: float
    details: dict[str | None, tuple[int, int | None]]
    version: str = "current"


#: the guide's patch-rule table.  ``current``: the version with the 30,000-patch limit (read 2026-11-27); ``previous``:
#: the models that version no longer sizes, from the version before it (a 1,536-patch budget at 2048 px)
OPENAI_PATCH_MODELS: dict[str, PatchModel] = {
    **{
        m: PatchModel(1.2, {"original": (65535, None), "low": (512, None), "high": (2048, 2500)})
        for m in ("gpt-5.6-sol", "gpt-5.6-terra", "gpt-5.6-luna")
    },
    "gpt-5.5": PatchModel(1.2, {"original": (6000, 10000), "low": (512, None), "high": (2048, 2500)}),
    **{
        m: PatchModel(1.2, {"high": (2048, 2500), "low": (2048, 6144), "original": (6000, 10000)})
        for m in ("gpt-5.4", "gpt-5.4-mini", "gpt-5.4-nano")
    },
    "gpt-5.2": PatchModel(1.2, {None: (2048, 6144)}),
    "gpt-4.1-mini": PatchModel(1.62, {None: (2048, 6144)}),
    "gpt-4.1-nano": PatchModel(2.46, {None: (2048, 1536)}, "previous"),
    "o4-mini": PatchModel(1.72, {None: (2048, 1536)}, "previous"),
    "gpt-5-mini": PatchModel(1.62, {None: (2048, 1536)}, "previous"),
    "gpt-5-nano": PatchModel(2.46, {None: (2048, 1536)}, "previous"),
}
#: a picture over this many patches after sizing is refused ("rejected rather than automatically scaled")
MAX_PATCHES = 30000
#: tokens reported for a picture the API would refuse: never chosen by a planner
REFUSED = 2**40


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
    """The patch-rule models (GPT-5.2 and later, the 4.1 and 5 minis).  Source: the "Images and vision" guide,
    "Calculating costs" (developers.openai.com/api/docs/guides/images-vision, read 2026-11-27): the picture is first
    fitted in the ``detail`` level's pixel limit "without enlarging smaller images"; patches = ceil(w/32) * ceil(h/32);
    over the level's patch budget it is shrunk by ``s = sqrt(32^2 * budget / (w h))`` times ``min(floor(w s / 32) /
    (w s / 32), floor(h s / 32) / (h s / 32))``, the sides rounded down; a picture still over 30,000 patches is
    refused; tokens = ceil(patches * the model's multiplier).  Worked examples: gpt-5.4 ``high`` (2048 px, 2,500
    patches, x1.2): 1024 x 1024 -> 1024 patches, ``ceil(1024 x 1.2) = 1229`` tokens; 2048 x 2048 -> 1600 x 1600, 2500
    patches, 3000 tokens.  The previous version of the guide (a 1,536-patch budget at 2048 px, which the table keeps
    for the models the current version no longer sizes): 1024 x 1024 -> 1024 patches; 1800 x 2400 -> shrink 0.603,
    adjusted 0.586, 1056 x 1408 = 1452 patches.  Options: the model's ``detail`` levels, the one ``auto`` means
    first (``low`` can cost more than ``high`` on gpt-5.4: 6,144 patches against 2,500).  Limits: 1,500 pictures
    per request.

    Ambiguous: how the first fit rounds ("rounding to integer pixels"): the code rounds down, as the later steps do.
    Two versions of the multiplier table are published; the code follows the current one where it sizes the model
    and names the version each model follows (:data:`OPENAI_PATCH_MODELS`)."""

    max_pictures = 1500
    source = f"{GUIDE} (read 2026-11-27)"
    patch = 32

    def __init__(self, model: str = "gpt-4.1-mini") -> None:
        if model not in OPENAI_PATCH_MODELS:
            raise ConfigError(
                f"openai-patch: unknown model {model!r}; patch-rule models: {', '.join(OPENAI_PATCH_MODELS)}"
            )
        self.spec = OPENAI_PATCH_MODELS[model]
        self.multiplier = self.spec.multiplier
        self.options = tuple(self.spec.details)
        self.default_model = model
        self.name = "openai-patch" if model == "gpt-4.1-mini" else f"openai-patch:{model}"

    def price(self, w: Arr, h: Arr, option: str | None = None) -> tuple[I64, I64, I64]:
        level = self.options[0] if option is None else option
        if level not in self.spec.details:
            raise ConfigError(f"{self.name}: detail must be one of {', '.join(map(str, self.options))}, got {option!r}")
        limit, budget = self.spec.details[level]
        p = self.patch
        fw, fh = _fit_inside(w, h, limit, limit)
        w0, h0 = fw.astype(np.float64), fh.astype(np.float64)
        over = (budget is not None) & (np.ceil(w0 / p) * np.ceil(h0 / p) > (budget or 0))
        s = np.sqrt(p * p * (budget or 1) / (w0 * h0))
        adjust = np.minimum(np.floor(w0 * s / p) / (w0 * s / p), np.floor(h0 * s / p) / (h0 * s / p))
        adjust = np.where(adjust > 0, adjust, 1.0)  # a side under one patch after the shrink: keep the plain factor
        s = np.where(over, s * adjust, 1.0)
        sw = np.maximum(1, np.floor(w0 * s + 1e-9)).astype(np.int64)
        sh = np.maximum(1, np.floor(h0 * s + 1e-9)).astype(np.int64)
        patches = (-(-sw // p)) * (-(-sh // p))
        tokens = np.ceil(patches * self.multiplier - 1e-9).astype(np.int64)
        return np.where(patches > MAX_PATCHES, REFUSED, tokens), sw, sh
