"""VLM input rules: how each model resizes a picture, what it bills for it, and its limits.

A rule answers, for a picture sent at ``w x h`` pixels: which ways there are to send it (:attr:`VlmRule.options`,
e.g. OpenAI's ``detail: high`` / ``low``), and for each the tokens billed and the size the model actually sees after
the provider's own resize (:meth:`VlmRule.price`, vectorised over NumPy arrays).  Each rule cites the document it
follows; where a document is ambiguous the docstring says which reading the code takes and why.  The worked examples
of those documents are the tests (``tests/vlm/test_rules.py``).

Specs (:func:`get_rule`): ``openai`` (GPT-4o tile rule; ``openai:gpt-4o-mini``, ``openai:o3`` ...), ``openai-patch``
(32-px patch rule; ``openai-patch:gpt-4.1-nano`` ...), ``anthropic``, ``gemini``, ``qwen2-vl`` (transformers' own
image processor, :mod:`foveate.vlm.qwen`), ``llava-1.5`` and ``patch:P`` (any ViT that bills ``ceil(w/P)*ceil(h/P)``
and resizes nothing).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..core.errors import ConfigError

Arr = np.ndarray


@dataclass(frozen=True)
class Sending:
    """One way to send a picture: the tokens billed and the size ``(w, h)`` the model sees after the provider's
    own resize; ``option`` is the rule's name for it (OpenAI's ``detail``), ``None`` where a rule has one way."""

    tokens: int
    seen: tuple[int, int]
    option: str | None = None


class VlmRule:
    """A VLM's input rule.  Subclasses set the class attributes and implement :meth:`price`."""

    name: str = ""
    #: request format of :func:`foveate.vlm.build_request`: ``openai`` (chat completions), ``anthropic``
    #: (messages), ``gemini`` (generateContent) or ``qwen2-vl`` (processor inputs)
    api: str = "openai"
    default_model: str = ""
    #: the ways to send a picture; ``options[0]`` is how the provider takes a picture sent plainly (the whole-image
    #: reference of every plan)
    options: tuple[str | None, ...] = (None,)
    #: most pictures one request may carry (``None``: no documented limit)
    max_pictures: int | None = None
    #: largest picture side the provider accepts at all (bigger ones are rejected, not resized)
    max_side: int | None = None
    #: the document the rule follows
    source: str = ""

    def price(self, w: Arr, h: Arr, option: str | None = None) -> tuple[Arr, Arr, Arr]:
        """``(tokens, seen_w, seen_h)`` for pictures sent at ``w x h`` (int arrays of one shape) with ``option``."""
        raise NotImplementedError

    def fit(self, bw: Arr, bh: Arr, scale: Arr) -> tuple[Arr, Arr]:
        """The size to send a ``bw x bh`` source region at so that the model sees it at ``scale`` source pixels per
        pixel or finer: ``ceil(b / scale)`` (a rule whose own resize would round that down sends more)."""
        s = np.asarray(scale, np.float64)
        return (np.maximum(1, np.ceil(np.asarray(bw) / s - 1e-9)).astype(np.int64),
                np.maximum(1, np.ceil(np.asarray(bh) / s - 1e-9)).astype(np.int64))

    # -- conveniences over price ---------------------------------------------------------------------------

    def sendings(self, w: int, h: int) -> list[Sending]:
        """Every way to send one ``w x h`` picture, ``options`` order."""
        out = []
        for opt in self.options:
            t, sw, sh = self.price(np.array([w]), np.array([h]), opt)
            out.append(Sending(int(t[0]), (int(sw[0]), int(sh[0])), opt))
        return out

    def tokens(self, w: int, h: int, option: str | None = None) -> int:
        """Tokens billed for one ``w x h`` picture sent with ``option`` (default: ``options[0]``)."""
        opt = self.options[0] if option is None else option
        return int(self.price(np.array([w]), np.array([h]), opt)[0][0])

    def whole(self, w: int, h: int) -> tuple[tuple[int, int], Sending]:
        """The whole image as the provider takes it: the size to send (the image itself, shrunk only where the
        provider would refuse it: ``max_side``) and its default :class:`Sending`."""
        s = 1.0 if self.max_side is None else min(1.0, self.max_side / max(w, h))
        sent = (max(1, int(w * s)), max(1, int(h * s)))
        return sent, self.sendings(*sent)[0]

    def describe(self) -> dict:
        return {"rule": self.name, "api": self.api, "model": self.default_model, "options": list(self.options),
                "max_pictures": self.max_pictures, "max_side": self.max_side, "source": self.source}


def _fit_inside(w: Arr, h: Arr, max_w: float, max_h: float) -> tuple[Arr, Arr]:
    """Scale down (never up), keeping the aspect ratio, to fit ``max_w x max_h``; sides rounded down, >= 1."""
    w, h = np.asarray(w, np.float64), np.asarray(h, np.float64)
    s = np.minimum(1.0, np.minimum(max_w / w, max_h / h))
    return np.maximum(1, np.floor(w * s + 1e-6)).astype(np.int64), np.maximum(1, np.floor(h * s + 1e-6)).astype(np.int64)


# ----------------------------------------------------------------------------------------------------------
# OpenAI


#: (base, per 512-px tile) tokens of the tile-rule models.  Source: OpenAI, "Images and vision", calculating costs
#: (platform.openai.com/docs/guides/images-vision#calculating-costs).
OPENAI_TILE_MODELS = {"gpt-4o": (85, 170), "gpt-4.1": (85, 170), "gpt-4.5": (85, 170),
                      "gpt-4o-mini": (2833, 5667), "o1": (75, 150), "o1-pro": (75, 150), "o3": (75, 150)}

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

    api = "openai"
    options = ("high", "low")
    max_pictures = 500
    source = "https://platform.openai.com/docs/guides/images-vision#calculating-costs"

    def __init__(self, model: str = "gpt-4o") -> None:
        if model not in OPENAI_TILE_MODELS:
            raise ConfigError(f"openai: unknown model {model!r}; tile-rule models: {', '.join(OPENAI_TILE_MODELS)} "
                              f"(32-px patch models use openai-patch:MODEL)")
        self.base, self.tile = OPENAI_TILE_MODELS[model]
        self.default_model = model
        self.name = "openai" if model == "gpt-4o" else f"openai:{model}"

    def price(self, w, h, option=None):
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

    api = "openai"
    max_pictures = 500
    source = "https://platform.openai.com/docs/guides/images-vision#calculating-costs"
    cap = 1536
    patch = 32

    def __init__(self, model: str = "gpt-4.1-mini") -> None:
        if model not in OPENAI_PATCH_MODELS:
            raise ConfigError(f"openai-patch: unknown model {model!r}; patch-rule models: "
                              f"{', '.join(OPENAI_PATCH_MODELS)}")
        self.multiplier = OPENAI_PATCH_MODELS[model]
        self.default_model = model
        self.name = "openai-patch" if model == "gpt-4.1-mini" else f"openai-patch:{model}"

    def price(self, w, h, option=None):
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


# ----------------------------------------------------------------------------------------------------------
# Anthropic


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
    api = "anthropic"
    default_model = "claude-sonnet-4-5"
    max_pictures = 100
    max_side = 8000
    source = "https://docs.anthropic.com/en/docs/build-with-claude/vision"
    long_edge = 1568
    max_patches = 1568
    patch = 28

    def _fits(self, w: Arr, h: Arr) -> Arr:
        p = self.patch
        return (np.maximum(w, h) <= self.long_edge) & ((-(-w // p)) * (-(-h // p)) <= self.max_patches)

    def price(self, w, h, option=None):
        w0, h0 = np.asarray(w, np.int64), np.asarray(h, np.int64)
        wf, hf = w0.astype(np.float64), h0.astype(np.float64)
        s = np.minimum(1.0, np.minimum(self.long_edge / np.maximum(wf, hf),
                                       np.sqrt(self.max_patches * self.patch ** 2 / (wf * hf))))
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


# ----------------------------------------------------------------------------------------------------------
# Google


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
    api = "gemini"
    default_model = "gemini-2.5-flash"
    max_pictures = 3000
    source = "https://ai.google.dev/gemini-api/docs/tokens"

    def price(self, w, h, option=None):
        w, h = np.asarray(w, np.int64), np.asarray(h, np.int64)
        small = (w <= 384) & (h <= 384)
        tiles = np.where(small, 1, (-(-w // 768)) * (-(-h // 768)))
        return 258 * tiles, w.copy(), h.copy()


# ----------------------------------------------------------------------------------------------------------
# Open models


class Llava15(VlmRule):
    """LLaVA-1.5: every picture is padded to a square (the LLaVA-1.5 recipe; ``do_pad=True`` in transformers'
    ``LlavaImageProcessor``) and resized to 336 x 336 for CLIP ViT-L/14-336: 24 x 24 = 576 tokens, whatever its
    size.  Source: huggingface.co/docs/transformers/model_doc/llava (Liu et al., "Improved Baselines with Visual
    Instruction Tuning", 2023).  One picture per request: the model "has not been explicitly trained to process
    multiple images in the same prompt" (same page)."""

    name = "llava-1.5"
    api = "openai"  # OpenAI-compatible servers (vLLM, llama.cpp) take this body
    default_model = "llava-hf/llava-1.5-7b-hf"
    max_pictures = 1
    source = "https://huggingface.co/docs/transformers/model_doc/llava"
    side = 336

    def price(self, w, h, option=None):
        w, h = np.asarray(w, np.float64), np.asarray(h, np.float64)
        s = self.side / np.maximum(w, h)
        return (np.full(w.shape, 576, np.int64), np.maximum(1, np.floor(w * s + 1e-6)).astype(np.int64),
                np.maximum(1, np.floor(h * s + 1e-6)).astype(np.int64))


class Patches(VlmRule):
    """Any ViT that cuts ``P x P`` patches from the picture as sent and resizes nothing: ceil(w/P) * ceil(h/P)
    tokens (foveate's estimate before provider rules existed; ``patch:14`` for CLIP-L/14)."""

    api = "openai"
    default_model = "your-model"

    def __init__(self, patch: int = 14) -> None:
        if patch < 1:
            raise ConfigError(f"patch:P needs P >= 1, got {patch}")
        self.patch = patch
        self.name = f"patch:{patch}"
        self.source = "ceil(w/P) * ceil(h/P), no resize"

    def price(self, w, h, option=None):
        w, h = np.asarray(w, np.int64), np.asarray(h, np.int64)
        return (-(-w // self.patch)) * (-(-h // self.patch)), w.copy(), h.copy()


# ----------------------------------------------------------------------------------------------------------
# Registry


def _arg(spec: str) -> str | None:
    return spec.split(":", 1)[1] if ":" in spec else None


def _qwen(arg: str | None) -> VlmRule:
    from .qwen import Qwen2VL

    return Qwen2VL(arg)


def _patch(arg: str | None) -> VlmRule:
    try:
        return Patches(int(arg or ""))
    except ValueError:
        raise ConfigError(f"patch:P needs a whole number of pixels, got {arg!r}") from None


_RULES: dict[str, Callable[[str | None], VlmRule]] = {
    "openai": lambda a: OpenAITiles(a or "gpt-4o"),
    "openai-patch": lambda a: OpenAIPatches(a or "gpt-4.1-mini"),
    "anthropic": lambda a: Anthropic(),
    "gemini": lambda a: Gemini(),
    "qwen2-vl": _qwen,
    "llava-1.5": lambda a: Llava15(),
    "patch": _patch,
}
_CACHE: dict[str, VlmRule] = {}


def register_rule(name: str, factory: Callable[[str | None], VlmRule]) -> None:
    """Add a rule: ``factory(arg)`` makes it from the spec's part after ``name:`` (``None`` without one)."""
    _RULES[name] = factory
    for key in [k for k in _CACHE if k.split(":", 1)[0] == name]:
        del _CACHE[key]


def list_rules() -> list[str]:
    """The registered rule names (``patch`` takes ``:P``)."""
    return list(_RULES)


def get_rule(spec: str | VlmRule) -> VlmRule:
    """A rule from its spec: ``openai``, ``openai:gpt-4o-mini``, ``openai-patch:gpt-4.1-nano``, ``anthropic``,
    ``gemini``, ``qwen2-vl``, ``llava-1.5``, ``patch:14`` (a :class:`VlmRule` is returned as is)."""
    if isinstance(spec, VlmRule):
        return spec
    key = str(spec).strip().lower()
    if key not in _CACHE:
        name = key.split(":", 1)[0]
        if name not in _RULES:
            raise ConfigError(f"unknown VLM rule {spec!r}; known: {', '.join(list_rules())} (patch takes :P, "
                              "openai and openai-patch take :MODEL)")
        if name in ("anthropic", "gemini", "llava-1.5") and _arg(key):
            raise ConfigError(f"{name} takes no argument, got {spec!r}")
        _CACHE[key] = _RULES[name](_arg(key))
    return _CACHE[key]


__all__ = ["Sending", "VlmRule", "OpenAITiles", "OpenAIPatches", "Anthropic", "Gemini", "Llava15", "Patches",
           "OPENAI_TILE_MODELS", "OPENAI_PATCH_MODELS", "get_rule", "list_rules", "register_rule"]
