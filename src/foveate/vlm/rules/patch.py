"""Any ViT that bills ``ceil(w/P) * ceil(h/P)`` patches and resizes nothing (``patch:P``)."""

from __future__ import annotations

import numpy as np

from ...core.errors import ConfigError
from ...core.types import I64
from .base import Arr, VlmRule

#: the largest patch side ``patch:P`` takes (no vision encoder uses one near it; larger numbers overflow the arithmetic)
MAX_PATCH = 4096


class Patches(VlmRule):
    """Any ViT that cuts ``P x P`` patches from the picture as sent and resizes nothing: ceil(w/P) * ceil(h/P)
    tokens (foveate's estimate before provider rules existed; ``patch:14`` for CLIP-L/14)."""

    default_model = "your-model"

    def __init__(self, patch: int = 14) -> None:
        if not 1 <= patch <= MAX_PATCH:
            raise ConfigError(f"patch:P needs a whole number of pixels from 1 to {MAX_PATCH}, got {patch}")
        self.patch = patch
        self.name = f"patch:{patch}"
        self.source = "ceil(w/P) * ceil(h/P), no resize"

    def price(self, w: Arr, h: Arr, option: str | None = None) -> tuple[I64, I64, I64]:
        w, h = np.asarray(w, np.int64), np.asarray(h, np.int64)
        return (-(-w // self.patch)) * (-(-h // self.patch)), w.copy(), h.copy()
