"""The uniform floor: never worse than downsampling.

A foveated selection wins when it knows where to look (a question whose answer the ranker has found, a prompt) and
the print is too small for a uniform resize at this budget; it can lose to the uniform layout (:mod:`.uniform`)
when it does not (a photo asked about an object class, no text-aware signal).  For each (texture, query,
budget) the gate reads a few features of the situation (:func:`floor_features`) and a learned linear rule decides
(:func:`prefer_uniform`): ``w . f < 0`` -> send the uniform layout instead.  The weights are fitted by
``foveate train`` on the training split (:mod:`foveate.train.floor`): per query and budget, did the foveated
selection make the answer legible where the uniform layout did not, or the other way round; the training also
calibrates a margin on cross-fitted folds and folds it into the bias, so the selection foveates only where it is
expected to beat the uniform layout with that margin.  Besides the budget and the print, the gate reads the query's
kind (a one- or two-word name, a question), how much of the image the likely answer lines cover, and how much of
their probability lies on stray lines: small, and far from the salient parts of the image (a label on a photo that
a class name happens to match).  ``foveate eval`` reports how often it falls back (the ``fall-back %`` column).

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
    "short_query",  # the query is one or two words (a name: "dog", "total"), not a question
    "signal_line_cover",  # text_signal x log2(share of the image the likely lines cover, by probability; >= 1/4096)
    "stray_lines",  # probability of the likely lines that are small (< 1 % of the image) and far from the salient parts
)

#: ``text_share`` below this counts as this much in ``signal_text_share``
MIN_TEXT_SHARE = 1.0 / 256
#: ``signal_line_cover`` counts a smaller cover as this much
MIN_LINE_COVER = 1.0 / 4096
#: a line is small below this share of the image's area ...
STRAY_AREA = 0.01
#: ... and far from the salient parts when its centre is at least this share of the image's diagonal from the nearest
#: salient level-0 tile away from print (:func:`_salient_distance`)
STRAY_DISTANCE = 0.15
#: a tile is salient at this share of the strongest saliency (:func:`_salient_distance`)
SALIENT_LEVEL = 0.5
#: the regions around print reach down to this share of the strongest saliency
PRINT_LEVEL = 0.02


def floor_features(texture: Texture, query: Query, lines: LikelyLines | None, budget: int) -> dict[str, float]:
    """The gate's inputs (:data:`FLOOR_FEATURES`) for one (texture, query, budget); ``lines``: the likely answer lines
    the learned text term gave for the query (``None``: no text signal)."""
    gh, gw = texture.level_shapes[0]
    s = uniform_scale(texture.image_size, texture.patch_size, budget)
    h_med, share, has_lines = texture.derived(("floor_static",), lambda: _static(texture))
    legible = float(np.clip(math.log2(max(h_med, 1.0) / (8.0 * s)), -4.0, 4.0)) if has_lines else 0.0
    signal = lines is not None
    top = lines.top if lines is not None else 0.0
    cover, stray = _line_features(texture, lines) if lines is not None and len(lines.probs) else (0.0, 0.0)
    words = len(query.text.split()) if query.text else 0
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
        "short_query": float(0 < words <= 2),
        "signal_line_cover": float(signal) * math.log2(max(cover, MIN_LINE_COVER)),
        "stray_lines": stray,
    }


def _line_features(texture: Texture, lines: LikelyLines) -> tuple[float, float]:
    """(share of the image the likely lines cover, each line's area weighted by its probability; the probability of
    the lines that are small and far from the salient parts of the image)."""
    h, w = texture.image_size
    boxes = lines.boxes.reshape(-1, 4)
    area = np.clip(boxes[:, 2] - boxes[:, 0], 0, None) * np.clip(boxes[:, 3] - boxes[:, 1], 0, None) / float(h * w)
    cover = float((lines.probs * area).sum())
    dist = texture.derived(("floor_salient_distance",), lambda: _salient_distance(texture))
    if dist is None:
        return cover, 0.0
    gh, gw = dist.shape
    p = float(texture.patch_size)
    rows = np.clip(((boxes[:, 1] + boxes[:, 3]) / (2 * p)).astype(np.int64), 0, gh - 1)
    cols = np.clip(((boxes[:, 0] + boxes[:, 2]) / (2 * p)).astype(np.int64), 0, gw - 1)
    stray = (area < STRAY_AREA) & (dist[rows, cols] >= STRAY_DISTANCE)
    return cover, float(lines.probs[stray].sum())


def _salient_distance(texture: Texture) -> np.ndarray | None:
    """(gh, gw) distance of each level-0 tile to the nearest salient part away from print, as a share of the grid's
    diagonal.  Saliency spreads around a line of print (a white label on a photo outshines the objects): the
    connected regions of tiles at :data:`PRINT_LEVEL` of the strongest saliency that hold text are print; the
    salient parts are the tiles outside them at :data:`SALIENT_LEVEL` of the strongest saliency left.  ``None``
    without a saliency channel or anything salient away from print."""
    from scipy.ndimage import distance_transform_edt, label

    if "saliency" not in texture.channels:
        return None
    sal = texture.channel("saliency")
    rest = np.ones(sal.shape, bool)
    if "text" in texture.channels and float(sal.max()) > 0.0:
        regions, _ = label(sal >= PRINT_LEVEL * float(sal.max()), np.ones((3, 3), bool))
        text = texture.channel("text") > 0
        printed = np.unique(regions[text & (regions > 0)])
        rest = ~(np.isin(regions, printed) & (regions > 0)) & ~text
    top = float(sal[rest].max()) if rest.any() else 0.0
    if top <= 0.0:
        return None
    objects = rest & (sal >= SALIENT_LEVEL * top)
    dist = np.asarray(distance_transform_edt(~objects), np.float64)
    return dist / math.hypot(*sal.shape)


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
