"""A question's MiniLM embedding (query time, once per distinct text): on onnxruntime where the exported encoder is
prepared (:mod:`.query_onnx`), else on torch with the lines' own model (:mod:`foveate.channels.text.embed`, whose
names are re-exported here)."""

from __future__ import annotations

import functools

import numpy as np

from ...channels.text.embed import EMBED_DIM, EMBED_MAX_TOKENS, TEXT_EMBEDDER, embed_texts, text_embedder
from ...core.device import request_threads
from .query_onnx import query_encoder

__all__ = ["EMBED_DIM", "EMBED_MAX_TOKENS", "TEXT_EMBEDDER", "embed_query", "embed_texts", "text_embedder"]


@functools.lru_cache(maxsize=512)
def _embed_query_cached(text: str) -> np.ndarray:
    encoder = query_encoder()  # onnxruntime, ~2.5x as fast for one sentence (foveate.query.text.query_onnx)
    if encoder is not None:
        v = encoder(text)
    else:
        with request_threads():  # one question: steady latency on a busy CPU (see foveate.core.device.REQUEST_THREADS)
            v = embed_texts([text])[0]
    v.flags.writeable = False
    return v


def embed_query(text: str) -> np.ndarray:
    """The query's MiniLM embedding (384,) float32, computed once per distinct text (LRU cache of 512)."""
    return _embed_query_cached(text)
