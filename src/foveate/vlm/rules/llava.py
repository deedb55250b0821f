"""LLaVA-1.5: every picture padded to a square and resized to 336 x 336 (576 tokens)."""

from __future__ import annotations

import numpy as np

from ...core.types import I64
from .base import Arr, VlmRule


class Llava15(VlmRule):
    """LLaVA-1.5: every picture is padded to a square (the LLaVA-1.5 recipe; ``do_pad=True`` in transformers'
    ``LlavaImageProcessor``) and resized to 336 x 336 for CLIP ViT-L/14-336: 24 x 24 = 576 tokens, whatever its
    size.  Source: huggingface.co/docs/transformers/model_doc/llava (Liu et al., "Improved Baselines with Visual
    Instruction Tuning", 2023).  One picture per request: the model "has not been explicitly trained to process
    multiple images in the same prompt" (same page)."""

    name = "llava-1.5"
    # the OpenAI body (the default format): OpenAI-compatible servers (vLLM, llama.cpp) take it
    default_model = "llava-hf/llava-1.5-7b-hf"
    max_pictures = 1
    source = "https://huggingface.co/docs/transformers/model_doc/llava"
    side = 336

    def price(self, w: Arr, h: Arr, option: str | None = None) -> tuple[I64, I64, I64]:
        w, h = np.asarray(w, np.float64), np.asarray(h, np.float64)
        s = self.side / np.maximum(w, h)
        return (
            np.full(w.shape, 576, np.int64),
            np.maximum(1, np.floor(w * s + 1e-6)).astype(np.int64),
            np.maximum(1, np.floor(h * s + 1e-6)).astype(np.int64),
        )
