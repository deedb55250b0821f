"""The uniform floor: never worse than downsampling.

A foveated selection wins when it knows where to look (a question whose answer the ranker has found, a prompt) and
the print is too small for a uniform resize at this budget; it can lose to the uniform layout (:mod:`.uniform`)
when it does not (a photo asked about an object class, no text-aware signal).  For each (texture, query,
budget) the gate reads a few features of the situation (:func:`floor_features`) and a learned linear rule decides
(:func:`prefer_uniform`): ``w . f < 0`` -> send the uniform layout instead.  The weights are fitted by
``foveate train`` on the training split (:mod:`foveate.train.floor`): per query and budget, did the foveated
selection make the answer legible where the uniform layout did not, or the other way round.

Scorers without a gate (the hand-set weights) never take the floor, nor does a query with points or boxes (the caller
said where to look); ``SelectConfig(floor="off")`` turns it off.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from ..channels.text.group import stored_lines
from ..weights.weights import FloorGate
from .uniform import uniform_scale

if TYPE_CHECKING:
    from ..core.texture import Texture
    from ..query.base import LikelyLines
    from ..query.query import Query

#: The gate's inputs, in order (a weights file names them; a missing weight counts as 0).
FLOOR_FEATURES = (
    "bias",  # 1
    "log_scale",  # log2 of the uniform layout's downscale at this budget
    "print_legible",  # log2(median OCR line height / (8 px * that downscale)), clipped to [-4, 4]; 0 without text
    "has_lines",  # OCR found text
    "text_signal",  # the query text reached the learned text term (a question on a page with text)
    "top_prob",  # the ranker's probability of its best line (0 without a text signal)
    "prompt",  # the query has points or boxes
    "no_query",  # the query is empty
    "log_budget_share",  # log2(budget / level-0 tiles)
    "text_share",  # share of level-0 tiles holding text
    "signal_text_share",  # text_signal x log2(text_share, floored at 1/256): a question read on a few stray lines
)

#: ``text_share`` below this counts as this much in ``signal_text_share``
MIN_TEXT_SHARE = 1.0 / 256


def floor_features(texture: Texture, query: Query, lines: LikelyLines | None, budget: int) -> dict[str, float]:
    """The gate's inputs (:data:`FLOOR_FEATURES`) for one (texture, query, budget); ``lines``: the likely answer lines
    the learned text term gave for the query (``None``: no text signal)."""
    gh, gw = texture.level_shapes[0]
    s = uniform_scale(texture.image_size, texture.patch_size, budget)
    h_med, share, has_lines = texture.derived(("floor_static",), lambda: _static(texture))
    legible = float(np.clip(math.log2(max(h_med, 1.0) / (8.0 * s)), -4.0, 4.0)) if has_lines else 0.0
    signal = lines is not None
    top = lines.top if lines is not None else 0.0
    return {
        "bias": 1.0,
        "log_scale": math.log2(s),
        "print_legible": legible,
        "has_lines": float(has_lines),
        "text_signal": float(signal),
        "top_prob": top,
        "prompt": float(query.has_prompt),
        "no_query": float(query.is_empty),
        "log_budget_share": math.log2(budget / (gh * gw)),
        "text_share": share,
        "signal_text_share": float(signal) * math.log2(max(share, MIN_TEXT_SHARE)),
    }


def _static(texture: Texture) -> tuple[float, float, bool]:
    """What does not depend on the query or the budget: the median OCR line height, the share of level-0 tiles
    holding text, whether OCR found lines."""
    ocr = stored_lines(texture)
    has_lines = bool(ocr)
    boxes = np.array([ln.box for ln in ocr or ()], np.float64).reshape(-1, 4)
    h_med = float(np.median(boxes[:, 3] - boxes[:, 1])) if has_lines else 0.0
    share = float((texture.channel("text") > 0).mean()) if "text" in texture.channels else 0.0
    return h_med, share, has_lines


def floor_margin(weights: Mapping[str, float], features: Mapping[str, float]) -> float:
    """``w . f``: positive -> the foveated selection is expected to win, negative -> the uniform layout."""
    return FloorGate(weights).margin(features)


def prefer_uniform(
    texture: Texture, query: Query, gate: FloorGate | None, lines: LikelyLines | None, budget: int
) -> tuple[bool, float]:
    """``(take the uniform layout?, the gate's margin)``; ``(False, inf)`` without a gate."""
    if gate is None or not gate.weights:
        return False, math.inf
    margin = gate.margin(floor_features(texture, query, lines, budget))
    return margin < 0.0, margin
