"""A toy query term: the left half of the picture, for a query whose text says "left"."""

from __future__ import annotations

import numpy as np

from foveate.query.base import QueryTerm


def left_half(texture, query, weights):
    if query.text is None or "left" not in query.text.lower():
        return None
    gh, gw = texture.level_shapes[0]
    out = np.zeros((gh, gw), np.float32)
    out[:, : gw // 2] = 1.0
    return out


LEFT = QueryTerm("left", left_half, 6.0, "the left half of the picture, when the question says left", uses_text=True)
