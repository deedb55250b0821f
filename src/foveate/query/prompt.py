"""The ``prompt`` query term: SAM-style points and boxes on the level-0 grid."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .._lazy import lazy_module
from ..core.types import F32
from ..weights.defaults import QUERY_WEIGHTS
from .base import QueryTerm

cv2 = lazy_module("cv2")

if TYPE_CHECKING:
    from ..core.texture import Texture
    from ..weights.weights import Weights
    from .query import Query


def prompt_map(texture: Texture, query: Query, weights: Weights | None = None) -> F32 | None:
    """SAM-style prompts on the level-0 grid: a Gaussian bump (sigma = 1.5 tiles) at each point (negative for
    label 0) and, for each box, the fraction of each tile inside it, softened by a one-tile falloff."""
    if not query.has_prompt:
        return None
    gh, gw = texture.level_shapes[0]
    p = float(texture.patch_size)
    cy = (np.arange(gh) + 0.5) * p
    cx = (np.arange(gw) + 0.5) * p
    out = np.zeros((gh, gw), np.float32)
    for (x, y), label in zip(query.points, query.point_labels):
        sigma = 1.5 * p
        bump = np.exp(-((cy[:, None] - y) ** 2 + (cx[None, :] - x) ** 2) / (2 * sigma * sigma))
        out = np.maximum(out, bump) if label == 1 else out - bump
    h, w = texture.image_size
    for x0, y0, x1, y1 in query.boxes:
        x0, x1 = max(x0, 0.0), min(x1, float(w))
        y0, y1 = max(y0, 0.0), min(y1, float(h))
        fy = np.clip(np.minimum(np.arange(gh) * p + p, y1) - np.maximum(np.arange(gh) * p, y0), 0, p) / p
        fx = np.clip(np.minimum(np.arange(gw) * p + p, x1) - np.maximum(np.arange(gw) * p, x0), 0, p) / p
        inside = np.outer(fy, fx).astype(np.float32)
        soft = cv2.GaussianBlur(inside, (0, 0), 1.0, borderType=cv2.BORDER_REPLICATE) * 0.5
        out = np.maximum(out, np.maximum(inside, soft))
    return np.clip(out, -1.0, 1.0)


PROMPT = QueryTerm("prompt", prompt_map, QUERY_WEIGHTS["prompt"], "SAM-style point and box prompts")
