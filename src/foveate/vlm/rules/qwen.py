"""Qwen2-VL, Qwen2.5-VL and Qwen3-VL through transformers' own image processor: the size the model sees comes from
the processor module's ``smart_resize`` and the token count from the processor itself, not from a copy of their
arithmetic; :meth:`Qwen2VL.inputs` returns the processor's ``pixel_values`` and ``image_grid_thw``.  Qwen3-VL has no
image processor of its own in transformers: it is the Qwen2-VL one with 16-px patches and its checkpoint's sizes
(:data:`QWEN_MODELS`).

transformers is imported here, inside functions, only when a Qwen2-VL rule is used.  transformers >= 5 ships the
processor in two backends: ``Qwen2VLImageProcessorPil`` (NumPy + PIL) and a torchvision one; the PIL backend is
used (torchvision is not a dependency).  transformers 4.x names its NumPy processor ``Qwen2VLImageProcessor``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from ...core.errors import ConfigError
from ...core.types import I64, U8
from ..formats import QWEN_PROCESSOR
from .base import Arr, Sending, VlmRule

#: tokens reported for a picture the processor refuses (aspect ratio over 200): never chosen by a planner
REFUSED = 2**40
#: the largest ``max_pixels`` ``qwen2-vl:N`` takes (2**31 - 1: a picture of 46k x 46k pixels)
MAX_PIXELS = 2**31 - 1


@dataclass(frozen=True)
class QwenModel:
    """What a Qwen family's checkpoints configure the processor with (``preprocessor_config.json``, read
    2026-11-27): patch size (two patches merged per token side), the pixel range, the normalisation, an example id."""

    patch_size: int
    min_pixels: int | None  # None: transformers' defaults (56 x 56 to 28 x 28 x 1280)
    max_pixels: int | None
    model: str
    mean_std: float | None = None  # Qwen3-VL normalises with 0.5 / 0.5 (None: the processor's CLIP values)


#: rule name -> the family's processor settings
QWEN_MODELS = {
    "qwen2-vl": QwenModel(14, None, None, "Qwen/Qwen2-VL-7B-Instruct"),
    "qwen2.5-vl": QwenModel(14, 3136, 12845056, "Qwen/Qwen2.5-VL-7B-Instruct"),
    "qwen3-vl": QwenModel(16, 65536, 16777216, "Qwen/Qwen3-VL-8B-Instruct", 0.5),
}


def processor_class() -> type:
    """transformers' NumPy/PIL Qwen2-VL image processor class (no torchvision needed)."""
    try:
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

        return Qwen2VLImageProcessorPil
    except ImportError:  # transformers 4.x
        from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor

        return Qwen2VLImageProcessor


def _smart_resize() -> Callable[..., tuple[int, int]]:
    try:
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize
    except ImportError:  # transformers 4.x
        from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize
    return smart_resize


class Qwen2VL(VlmRule):
    """Qwen2-VL (and its successors): ``patch_size``-px patches merged 2 x 2, so one token per ``2 x patch_size`` px
    square of the picture as the processor resizes it (``smart_resize``: each side rounded to a multiple of the token
    side, the area kept between ``min_pixels`` and ``max_pixels``).  Source: transformers' ``Qwen2VLImageProcessor``
    (huggingface.co/docs/transformers/model_doc/qwen2_vl, model_doc/qwen3_vl; the checkpoints' preprocessor configs,
    read 2026-11-27): Qwen2-VL 14-px patches (28-px tokens) with transformers' defaults (56 x 56 to 28 x 28 x 1280
    px); Qwen2.5-VL the same patches, 3,136 to 12,845,056 px; Qwen3-VL 16-px patches (32-px tokens), 65,536 to
    16,777,216 px.  ``NAME:N`` sets max_pixels to N.  No documented picture limit: the context length bounds it."""

    format = QWEN_PROCESSOR

    def __init__(self, arg: str | None = None, family: str = "qwen2-vl") -> None:
        spec = QWEN_MODELS[family]
        self.family, self.spec = family, spec
        self.name = family
        self.default_model = spec.model
        self.source = (
            f"https://huggingface.co/docs/transformers/model_doc/{family.replace('.', '_').replace('-', '_')}"
            " (read 2026-11-27)"
        )
        self.max_pixels: int | None = spec.max_pixels
        if arg:
            try:
                self.max_pixels = int(arg)
            except ValueError:
                raise ConfigError(f"{family}:N takes max_pixels as a whole number, got {arg!r}") from None
            if not 56 * 56 <= self.max_pixels <= MAX_PIXELS:
                raise ConfigError(f"{family}: max_pixels must be from {56 * 56} to {MAX_PIXELS}, got {self.max_pixels}")
            self.name = f"{family}:{self.max_pixels}"
        self._proc: Any = None

    @property
    def processor(self) -> Any:
        """The transformers image processor this rule prices with (made on first use)."""
        if self._proc is None:
            cls = processor_class()
            kwargs: dict[str, Any] = {"patch_size": self.spec.patch_size}
            if self.spec.min_pixels:
                kwargs["min_pixels"] = self.spec.min_pixels
            if self.max_pixels:
                kwargs["max_pixels"] = self.max_pixels
            if self.spec.mean_std is not None:
                kwargs["image_mean"] = kwargs["image_std"] = [self.spec.mean_std] * 3
            self._proc = cls(**kwargs)
            size = self._proc.size

            def get(key: str) -> Any:  # transformers 4 sizes are dicts, 5 dataclasses
                return size.get(key) if isinstance(size, dict) else getattr(size, key, None)

            self.min_pixels = int(get("shortest_edge") or self._proc.min_pixels)
            self.max_pixels = int(get("longest_edge") or self._proc.max_pixels)
            self.factor = int(self._proc.patch_size * self._proc.merge_size)
            self._resize = lru_cache(maxsize=65536)(self._resize_one)
        return self._proc

    def _resize_one(self, w: int, h: int) -> tuple[int, int, int]:
        """(tokens, seen_w, seen_h) of one picture, from transformers."""
        proc = self._proc
        try:
            sh, sw = _smart_resize()(h, w, factor=self.factor, min_pixels=self.min_pixels, max_pixels=self.max_pixels)
        except ValueError:  # aspect ratio over 200
            return REFUSED, 1, 1
        if hasattr(proc, "get_number_of_image_patches"):
            patches = proc.get_number_of_image_patches(h, w, {})
        else:  # pragma: no cover - transformers < 4.50
            patches = (sh // proc.patch_size) * (sw // proc.patch_size)
        return patches // proc.merge_size**2, sw, sh

    def price(self, w: Arr, h: Arr, option: str | None = None) -> tuple[I64, I64, I64]:
        self.processor  # noqa: B018 -- makes the processor and the resize cache
        w, h = np.asarray(w, np.int64), np.asarray(h, np.int64)
        out = np.array([self._resize(int(a), int(b)) for a, b in zip(w.ravel(), h.ravel())], np.int64).reshape(-1, 3)
        shape = w.shape
        return out[:, 0].reshape(shape), out[:, 1].reshape(shape), out[:, 2].reshape(shape)

    def fit(self, bw: Arr, bh: Arr, scale: Arr) -> tuple[Arr, Arr]:
        """Sides rounded *up* to the processor's multiple of the token side, so that ``smart_resize`` (which rounds to
        the nearest multiple) never shrinks a crop below the scale it was selected at."""
        self.processor  # noqa: B018
        w, h = super().fit(bw, bh, scale)
        f = self.factor
        return -(-w // f) * f, -(-h // f) * f

    def whole(self, w: int, h: int) -> tuple[tuple[int, int], Sending]:
        sent, sending = super().whole(w, h)
        if sending.tokens >= REFUSED:
            raise ConfigError(f"{self.family} takes pictures with an aspect ratio up to 200, got {w}x{h}")
        return sent, sending

    def inputs(self, pictures: list[U8]) -> dict[str, Any]:
        """The processor's model inputs for RGB pictures (H, W, 3) uint8: ``pixel_values`` (patches, C*T*14*14)
        and ``image_grid_thw`` (pictures, 3) as torch tensors."""
        out = self.processor(images=[np.ascontiguousarray(p) for p in pictures], return_tensors="pt")
        return {"pixel_values": out["pixel_values"], "image_grid_thw": out["image_grid_thw"]}
