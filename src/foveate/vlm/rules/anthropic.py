"""Anthropic: Claude bills 28 x 28-px patches of the picture as resized, within a long-edge and a patch limit per
model tier."""

from __future__ import annotations

import numpy as np

from ...core.errors import ConfigError
from ...core.types import I64
from ..formats import ANTHROPIC_MESSAGES
from .base import Arr, VlmRule

VISION = "https://platform.claude.com/docs/en/build-with-claude/vision"
COORDINATES = "https://platform.claude.com/docs/en/build-with-claude/vision-coordinates"

#: tier -> (long-edge limit px, visual-token limit).  Source: the vision page's table (read 2026-11-27): "Claude 4.7
#: and later models" 2576 px and 4784 tokens, "All other models" 1568 px and 1568 tokens.
TIERS = {"standard": (1568, 1568), "high": (2576, 4784)}


class Anthropic(VlmRule):
    """Claude.  Source: platform.claude.com/docs/en/build-with-claude/vision (read 2026-11-27): "Each patch is a
    28×28-pixel block of the image, referred to as a visual token. An image, therefore, costs ``⌈width / 28⌉ ×
    ⌈height / 28⌉`` visual tokens"; a picture over the model's long-edge or visual-token limit is downscaled.  The
    resize is the reference implementation of .../vision-coordinates: the largest aspect-preserving size whose
    28-padded sides are within the edge limit and whose token cost is within the budget, found by a binary search on
    the long edge, the short edge ``round(long / aspect)`` (half to even, as "the live API" does).

    Worked examples there (standard tier; high tier in brackets): 200 x 200 not resized, 64 tokens; 1000 x 1000 not
    resized, 1296; 1092 x 1092 not resized, 1521; 1920 x 1080 -> 1456 x 819, 1560 [not resized, 2691]; 2000 x 1500 ->
    1270 x 952, 1564 [not resized, 3888]; 3840 x 2160 -> 1456 x 819, 1560 [2576 x 1449, 4784]; an A4 scan at 130 DPI,
    1075 x 1520 (2145 tokens) -> 924 x 1307 [not resized].  Limits: 100 pictures per API request for models with a
    200k-token context window, 600 for the others (the code takes 100); 8000 x 8000 px each.

    Ambiguous: the table says 1269 x 952 for 2000 x 1500, the reference implementation (and an earlier version of
    the table) 1270 x 952: the code follows the implementation, which the page says matches the live API; both cost
    1564 tokens.  The per-image ``transformations.oversized_image`` setting only chooses between this downsizing
    and an error, so it is not an option of the plan."""

    format = ANTHROPIC_MESSAGES
    max_pictures = 100
    max_side = 8000
    source = f"{VISION} (read 2026-11-27)"
    patch = 28

    def __init__(self, tier: str = "standard", model: str = "claude-sonnet-4-5") -> None:
        if tier not in TIERS:
            raise ConfigError(f"anthropic: unknown tier {tier!r}; tiers: {', '.join(TIERS)}")
        self.long_edge, self.max_tokens = TIERS[tier]
        self.tier = tier
        self.default_model = model
        self.name = "anthropic" if tier == "standard" else f"anthropic:{tier}"

    def _fits(self, w: I64, h: I64) -> Arr:
        p, e = self.patch, self.long_edge
        pw, ph = -(-w // p), -(-h // p)
        out: Arr = (pw * p <= e) & (ph * p <= e) & (pw * ph <= self.max_tokens)
        return out

    def resize(self, w: Arr, h: Arr) -> tuple[I64, I64]:
        """The size Claude processes a ``w x h`` picture at (the reference implementation, vectorised)."""
        w, h = np.asarray(w, np.int64), np.asarray(h, np.int64)
        long, short = np.maximum(w, h), np.minimum(w, h)
        aspect = long / np.maximum(short, 1)
        lo, hi = np.ones_like(long), long.copy()  # the largest long edge that fits lies in [lo, hi]
        done = self._fits(w, h)
        lo = np.where(done, long, lo)
        hi = np.where(done, long, hi)
        while (active := lo < hi).any():
            mid = (lo + hi + 1) // 2
            ok = self._fits(mid, np.maximum(np.round(mid / aspect), 1).astype(np.int64))
            lo = np.where(active & ok, mid, lo)
            hi = np.where(active & ~ok, mid - 1, hi)
        other = np.where(done, short, np.maximum(np.round(lo / aspect), 1)).astype(np.int64)
        wide = w >= h
        return np.where(wide, lo, other), np.where(wide, other, lo)

    def price(self, w: Arr, h: Arr, option: str | None = None) -> tuple[I64, I64, I64]:
        sw, sh = self.resize(w, h)
        return (-(-sw // self.patch)) * (-(-sh // self.patch)), sw, sh
