"""The hand-set text rule (``weights="handset"``, and features of the learned ranker): lines matching the query's words
or meaning, spread to where a field's value sits relative to them (:func:`relevance_map`), with the constants below.
"""

from __future__ import annotations

import numpy as np

from ...channels.text.group import paint_boxes
from .layout import TextIndex
from .match import MATCH_THRESHOLD, LineMatch, semantic_scores

#: A line's painted value fades with its distance to the page's best line: exp(-(best - score) / SHARPNESS);
#: values below MIN_PAINT are not painted (the budget goes to the best matches).
SHARPNESS, MIN_PAINT = 0.1, 0.15
#: Spread of a matched line's value (fractions of it): the lines to its right on the same row (up to 3: a
#: value, or a row of table cells) and the next lines of the first one's block (a multi-line value); the lines
#: below it, following the chain of nearest lower neighbours (up to 5: a multi-line value or a table column);
#: a band to its right and a strip below it for values OCR could not read (handwriting, stamps, light ink).
SPREAD = {"right": 0.9, "below": 0.8, "value continued": 0.9, "band": 0.5, "strip": 0.5}
RIGHT_STEPS, BELOW_STEPS, BLOCK_STEPS, RIGHT_DECAY, BELOW_DECAY = 3, 5, 3, 0.9, 0.85
#: Line boxes are painted grown by this fraction of their height on every side.
PAD = 0.25
#: The band reaches this many line heights to the right (at most to the page edge); the strip 2.5 heights down.
BAND_HEIGHTS, STRIP_HEIGHTS = 12.0, 2.5


def paint_values(score: np.ndarray) -> np.ndarray:
    """Each line's painted value: its score, damped by how far it falls behind the page's best line,
    ``score * exp(-(best - score) / SHARPNESS)``; lines under :data:`MATCH_THRESHOLD` get 0.  Equal matches
    (the same label printed several times) stay equal; a near miss (CAT-B for CAT-A) fades."""
    if not len(score) or score.max() < MATCH_THRESHOLD:
        return np.zeros(len(score), np.float32)
    v = score * np.exp(-(float(score.max()) - score) / SHARPNESS)
    return np.where((score >= MATCH_THRESHOLD) & (v >= MIN_PAINT), v, 0.0).astype(np.float32)


def spread_lines(index: TextIndex, i: int, v: float) -> list[tuple[str, int, float]]:
    """Where the value of line ``i`` (painted value ``v``) may sit, as ``(relation, line, value)``: the lines to its
    right on the same row, the lines continuing the first one's block, the chain of lines below it
    (:data:`SPREAD`, :data:`RIGHT_STEPS` ...)."""
    out = []
    for rel, nxt, steps, decay in (
        ("right", index.right, RIGHT_STEPS, RIGHT_DECAY),
        ("below", index.below, BELOW_STEPS, BELOW_DECAY),
        ("value continued", index.cont, BLOCK_STEPS, RIGHT_DECAY),
    ):
        start = int(index.right[i]) if rel == "value continued" else i
        j, val = int(nxt[start]) if start >= 0 else -1, v * SPREAD[rel]
        for _ in range(steps):
            if j < 0 or j == i:
                break
            out.append((rel, j, val))
            j, val = int(nxt[j]), val * decay
    return out


def handset_features(index: TextIndex, lexical: np.ndarray, cosine: np.ndarray) -> np.ndarray:
    """What the hand-set rule paints on each line for a question, as features of the answer ranker
    (:data:`.features.HANDSET_COLUMNS`): the line's own painted value (:func:`paint_values` of the hand-set match)
    and the most it receives as the value of a matched line to its left (``right`` and ``value continued``) and
    above it (``below``).  ``lexical``, ``cosine``: :func:`.match.question_scores`.  (N, 3) float32."""
    vals = paint_values(np.maximum(lexical, semantic_scores(cosine)))
    out = np.zeros((len(vals), 3), np.float32)
    out[:, 0] = vals
    for i in np.nonzero(vals)[0]:
        for rel, j, val in spread_lines(index, int(i), float(vals[i])):
            c = 2 if rel == "below" else 1
            out[j, c] = max(out[j, c], val)
    return out


def relevance_map(index: TextIndex, m: LineMatch) -> np.ndarray:
    """Paint the matched lines and where their values sit on the level-0 grid: (gh, gw) float32 in [0, 1].

    Per matched line with painted value v (:func:`paint_values`): the line (v); the lines to its right on the
    same row (0.9 v, then x0.9 per step), and the lines continuing the first one's block (0.9 v, x0.9 per
    line); the chain of lines below it (0.8 v, then x0.85 per step); a band to its right and a strip below it
    (0.5 v).  Line boxes are grown by :data:`PAD` of their height.
    """
    vals = paint_values(m.score)
    h_img, w_img = index.image_size
    boxes, values = [], []
    for i in np.nonzero(vals)[0][np.argsort(-vals[vals > 0])]:
        v = float(vals[i])
        x0, y0, x1, y1 = index.boxes[i]
        lh = y1 - y0
        parts = [
            ("match", i, (x0, y0, x1, y1), v),
            ("band", i, (x1, y0 - 0.3 * lh, min(w_img, x1 + BAND_HEIGHTS * lh), y1 + 0.3 * lh), v * SPREAD["band"]),
            ("strip", i, (x0, y1, x1 + 2 * lh, min(h_img, y1 + STRIP_HEIGHTS * lh)), v * SPREAD["strip"]),
        ]
        parts += [(rel, j, tuple(index.boxes[j]), val) for rel, j, val in spread_lines(index, i, v)]
        for rel, j, box, val in parts:
            if rel not in ("band", "strip"):  # OCR boxes hug the ink: pad them (ascenders, underlines, margins)
                pad = PAD * (box[3] - box[1])
                box = (box[0] - pad, box[1] - pad, box[2] + pad, box[3] + pad)
            boxes.append(box)
            values.append(val)
            if rel not in ("band", "strip"):
                m.painted.append((int(j), rel, val))
    return paint_boxes(index.grid, index.patch, boxes, values)
