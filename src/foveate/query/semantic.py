"""The ``semantic`` query term: the query text's embedding (the text tower of the texture's own image-text model,
once per distinct text) against the tiles' semantic channels (:mod:`foveate.channels.semantic`).  The tiles' cosine
similarity is computed in the PCA space (exact for the reconstructed embeddings) and mapped to [0, 1] relative to the
image (median -> 0, 99th percentile -> 1), weight :data:`SEMANTIC_WEIGHT`.

The encode-time names (``ClipEncoder``, ``fit_pca``, ``register_encoder``, ...) moved to
:mod:`foveate.channels.semantic` in 0.3; they are importable from here until 0.4.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import numpy as np

from ..channels.semantic import (
    CLIP_MEAN,
    CLIP_STD,
    ENCODERS,
    ENV_MODEL,
    N_COMPONENTS,
    ClipEncoder,
    EncoderSpec,
    ImageTextEncoder,
    Pca,
    configured_model,
    fit_pca,
    load_clip,
    load_encoder,
    register_encoder,
    semantic_coefficients,
)
from ..core.errors import ConfigError
from ..weights.defaults import QUERY_WEIGHTS
from .base import QueryTerm, TermOutput

if TYPE_CHECKING:
    from ..core.texture import Texture
    from ..weights.weights import Weights
    from .query import Query

__all__ = [
    "CLIP_MEAN",
    "CLIP_STD",
    "ENCODERS",
    "ENV_MODEL",
    "N_COMPONENTS",
    "SEMANTIC",
    "SEMANTIC_WEIGHT",
    "ClipEncoder",
    "EncoderSpec",
    "ImageTextEncoder",
    "Pca",
    "configured_model",
    "cosine_map",
    "fit_pca",
    "load_clip",
    "load_encoder",
    "register_encoder",
    "semantic_coefficients",
    "semantic_query_map",
]

SEMANTIC_WEIGHT = QUERY_WEIGHTS["semantic"]


@functools.lru_cache(maxsize=256)
def _text_embedding(encoder: str, source: str, options: tuple, text: str) -> np.ndarray:
    v = load_encoder(encoder, source, dict(options)).encode_text([text])[0]
    v.flags.writeable = False
    return v


def cosine_map(coef: np.ndarray, mean: np.ndarray, basis: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Cosine between each tile's reconstructed embedding ``mean + basis @ coef`` and the unit text vector
    ``t``, computed in the 16-d space: (..., k) coefficients -> (...) cosines."""
    tp = basis.T @ t  # (k,)
    bm = basis.T @ mean  # (k,)
    dot = float(mean @ t) + coef @ tp
    norm2 = float(mean @ mean) + 2.0 * (coef @ bm) + (coef * coef).sum(-1)
    return dot / np.sqrt(np.maximum(norm2, 1e-12))


def semantic_query_map(texture: Texture, query: Query, weights: Weights | None = None) -> TermOutput | None:
    """The ``semantic`` query term: relative cosine similarity of each tile to the query text."""
    if query.text is None or "semantic" not in texture.groups or "semantic" in texture.absent:
        return None
    meta = texture.extras.get("semantic")
    if meta is None:
        return None
    opts = tuple(sorted((k, v) for k, v in texture.config.options if k == "semantic_size"))
    try:
        t = _text_embedding(meta["encoder"], meta["model"], opts, query.text)
    except ConfigError as exc:
        return TermOutput(
            None, (f"semantic channels present but their text encoder is unavailable here ({exc}); not used",)
        )
    cos = cosine_map(
        semantic_coefficients(texture),
        texture.tensors["semantic_mean"].float().numpy(),
        texture.tensors["semantic_basis"].float().numpy(),
        t,
    )
    lo, hi = np.percentile(cos, [50, 99])
    return TermOutput(np.clip((cos - lo) / max(hi - lo, 1e-6), 0.0, 1.0).astype(np.float32))


SEMANTIC = QueryTerm(
    "semantic",
    semantic_query_map,
    SEMANTIC_WEIGHT,
    "cosine between the query's text embedding and the tiles' semantic channels",
    uses_text=True,
)
