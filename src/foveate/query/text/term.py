"""The ``text`` query term (light, per question): where on the page the answer to the query text is, as a map on the
tile grid; notes and evidence for ``explain``.

Two ways, chosen by the scorer in use:

* **learned** (a scorer with a ``text_ranker``, e.g. the package's default weights): the answer ranker
  (:mod:`.ranker`) gives every OCR line a probability of holding the answer; each line is painted with
  ``1 + log(p) / sharpness`` (clipped to [0, 1]), grown by ``pad`` line heights (:func:`answer_map`).  With a
  ``text_extent`` model (:mod:`.extent`), the hull of each likely line and a neighbour that may continue its answer
  is painted the same way, at the pair's probability (:func:`answer_boxes`).
* **hand-set** (``weights="handset"``): lines matching the query's words or meaning, spread to where a field's
  value sits relative to them (:func:`relevance_map`), with the constants below.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import numpy as np

from ..terms import QueryTerm, register_query_term
from .group import paint_boxes
from .layout import TextIndex, text_index
from .match import MATCH_THRESHOLD, LineMatch, match_lines, semantic_scores

if TYPE_CHECKING:
    from ...core.texture import Texture
    from ..query import Query

_RECENT_LOCK = threading.Lock()

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
    for rel, nxt, steps, decay in (("right", index.right, RIGHT_STEPS, RIGHT_DECAY),
                                   ("below", index.below, BELOW_STEPS, BELOW_DECAY),
                                   ("value continued", index.cont, BLOCK_STEPS, RIGHT_DECAY)):
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
        parts = [("match", i, (x0, y0, x1, y1), v),
                 ("band", i, (x1, y0 - 0.3 * lh, min(w_img, x1 + BAND_HEIGHTS * lh), y1 + 0.3 * lh), v * SPREAD["band"]),
                 ("strip", i, (x0, y1, x1 + 2 * lh, min(h_img, y1 + STRIP_HEIGHTS * lh)), v * SPREAD["strip"])]
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


#: entries of a texture's recent text answers: a question's probabilities and painted map (learned), or its match
#: and map (hand-set)
RECENT_ANSWERS = 32


def _recent(index: TextIndex, key: tuple, make):
    """``make()``, cached in the index's recent answers (:data:`RECENT_ANSWERS`; selects may run in several threads).
    Keys hold the models themselves, not their ``id``: a freed model's id can be reused by the next one loaded, which
    would then read the dead one's answers."""
    with _RECENT_LOCK:
        hit = index.recent.get(key)
    if hit is not None:
        return hit
    value = make()
    with _RECENT_LOCK:
        index.recent[key] = value
        while len(index.recent) > RECENT_ANSWERS:
            index.recent.popitem(last=False)
    return value


def answer_probabilities(index: TextIndex, text: str, ranker) -> np.ndarray:
    """The ranker's probability for every line of ``index`` (cached per question and ranker)."""
    return _recent(index, ("answer", ranker, text), lambda: ranker.probabilities(index, text))


def answer_extent(index: TextIndex, text: str, p: np.ndarray, extent) -> tuple[np.ndarray, ...]:
    """:func:`.extent.answer_regions` for a question: (pairs, hulls, probabilities, heights)."""
    from .extent import answer_regions
    from .match import question_scores

    return answer_regions(index, p, *question_scores(index, text), extent)


def answer_boxes(index: TextIndex, text: str, ranker, extent=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What the learned text term paints for a question: ``(boxes (M, 4), probabilities (M,), heights (M,))`` -- every
    line with the ranker's probability, then, with an ``extent`` model, the hulls of likely lines with their
    neighbours (:func:`.extent.answer_regions`); a hull's height is the smaller of its two lines' (it is grown by that).
    The text term caches the map painted from them (:func:`text_query_map`), not the boxes."""
    p = np.asarray(answer_probabilities(index, text, ranker), np.float64)
    boxes, heights = index.boxes, index.boxes[:, 3] - index.boxes[:, 1]
    if extent is None or not len(p):
        return boxes, p, heights
    _, hb, hp, hh = answer_extent(index, text, p, extent)
    return np.concatenate([boxes, hb]), np.concatenate([p, hp]), np.concatenate([heights, hh])


def answer_map(index: TextIndex, probs: np.ndarray, sharpness: float, pad: float, fill: float = 0.0,
               boxes: np.ndarray | None = None, heights: np.ndarray | None = None) -> np.ndarray:
    """Paint each line (or each of ``boxes``, ``heights`` their line heights) with
    ``clip(1 + log(p) / sharpness, 0, 1)``, its box grown by ``pad`` of its height on every side, a tile the box
    covers a fraction f of at that value times ``1 - fill * (1 - f)`` (:func:`.group.paint_boxes`): (gh, gw) float32.
    With query weight a, the scorer's relevance of a line's tiles is proportional to ``p ** (a / sharpness)``: a sure
    answer stands out, an unsure ranker (the answer is on no line) paints little."""
    if not len(probs):
        return np.zeros(index.grid, np.float32)
    if boxes is None:
        boxes, heights = index.boxes, index.boxes[:, 3] - index.boxes[:, 1]
    values = np.clip(1.0 + np.log(np.maximum(probs, 1e-30)) / sharpness, 0.0, 1.0)
    keep = values > 0
    b = np.asarray(boxes, np.float64)[keep]
    g = pad * np.asarray(heights, np.float64)[keep][:, None]
    return paint_boxes(index.grid, index.patch, b + np.concatenate([-g, -g, g, g], 1), values[keep], fill=fill)


#: below this probability for its most likely line, the learned text term says it is unsure (a note)
UNSURE_ANSWER = 0.25


def text_query_map(texture: Texture, query: Query, notes: list, scorer=None) -> np.ndarray | None:
    """The ``text`` query term: where the answer to the query text is (see the module docstring)."""
    if query.text is None:
        return None
    index = text_index(texture)
    if index is None:
        return None
    blind = "the prompts and saliency" if query.has_prompt else "the query-blind ranking (saliency)"
    if not index.lines:
        notes.append(f"no text was found in this image (OCR), so the query text matches nothing; the selection "
                     f"follows {blind}")
        return np.zeros(index.grid, np.float32)
    ranker = getattr(scorer, "text_ranker", None)
    if ranker is not None:
        p = answer_probabilities(index, query.text, ranker)
        i = int(np.argmax(p))
        if p[i] < UNSURE_ANSWER:
            notes.append(f"no OCR line looks like the answer (most likely: {index.lines[i].text[:60]!r}, probability "
                         f"{p[i]:.2f}; on no line: {max(0.0, 1.0 - float(p.sum())):.2f}); the selection leans on {blind}")
        extent, paint = getattr(scorer, "text_extent", None), (scorer.text_sharpness, scorer.text_pad, scorer.text_fill)

        def make() -> np.ndarray:
            boxes, probs, heights = answer_boxes(index, query.text, ranker, extent)
            return answer_map(index, probs, *paint, boxes, heights)

        return _recent(index, ("map", ranker, extent, paint, query.text), make).copy()
    m, out = _handset_match(index, query.text)
    if not m.painted:
        i = int(np.argmax(m.score)) if len(m.score) else 0
        notes.append(f"no OCR line matches the query text (closest: {index.lines[i].text[:60]!r}, score "
                     f"{m.score[i]:.2f} < {MATCH_THRESHOLD}); the selection falls back to {blind}")
    return out.copy()


def _handset_match(index: TextIndex, text: str) -> tuple[LineMatch, np.ndarray]:
    """The hand-set match of ``text`` and the map painted from it (painting records the painted lines in the
    match, for ``explain``), cached in the index's recent answers."""
    def make() -> tuple[LineMatch, np.ndarray]:
        m = match_lines(index, text)
        return m, relevance_map(index, m)

    return _recent(index, ("match", text), make)


def text_evidence(texture: Texture, query: Query, scorer=None) -> list[dict]:
    """For ``explain``: the OCR lines that drove the text term for this query, best first (with a scorer that has
    an answer ranker, its five most probable lines, then with an extent model the three most probable hulls of a line
    and a neighbour that continues its answer; else the hand-set matches and their spread)."""
    index = text_index(texture)
    if index is None or query.text is None or not index.lines:
        return []
    ranker = getattr(scorer, "text_ranker", None)
    if ranker is not None:
        p = answer_probabilities(index, query.text, ranker)  # cached by the map
        top = np.argsort(-p, kind="stable")[:5]
        out = [{"term": "text", "relation": "answer", "text": index.lines[j].text, "box": list(index.lines[j].box),
                "probability": round(float(p[j]), 4)} for j in top if p[j] > 0]
        extent = getattr(scorer, "text_extent", None)
        if extent is not None:
            pairs, hulls, hp, _ = answer_extent(index, query.text, np.asarray(p, np.float64), extent)
            for k in np.argsort(-hp, kind="stable")[:3]:
                i, j = int(pairs[k, 0]), int(pairs[k, 1])
                if hp[k] >= 0.01:
                    out.append({"term": "text", "relation": "answer extent",
                                "text": f"{index.lines[i].text} | {index.lines[j].text}",
                                "box": [int(round(v)) for v in hulls[k]], "probability": round(float(hp[k]), 4)})
        return out
    m, _ = _handset_match(index, query.text)
    out, seen = [], set()
    for j, rel, v in sorted(m.painted, key=lambda t: -t[2]):
        if j in seen:  # a line reached several ways: keep the strongest
            continue
        seen.add(j)
        ln = index.lines[j]
        out.append({"term": "text", "relation": rel, "text": ln.text, "box": list(ln.box), "value": round(v, 3),
                    "lexical": round(float(m.lexical[j]), 3), "semantic": round(float(m.semantic[j]), 3),
                    "cosine": round(float(m.cosine[j]), 3)})
    return out


#: Scorer weight of the text term (its map is in [0, 1]): a full match adds 10 to the log-relevance (a box prompt
#: adds 4), so the matched region outranks every unrelated line of print (tuned on FUNSD from 4: see EVAL.md).
TEXT_WEIGHT = 10.0
#: The text term's weight in the need for detail: what it paints is text to be read, so it is refined to full
#: resolution even where a tile only grazes the ink.
TEXT_NEED = 8.0

register_query_term(QueryTerm(
    "text", text_query_map, TEXT_WEIGHT,
    "OCR lines matching the query (lexical + MiniLM), spread to where a field's value sits",
    uses_text=True, evidence=text_evidence, need_weight=TEXT_NEED, wants_scorer=True))
