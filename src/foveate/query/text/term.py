"""The ``text`` query term (light, per question): where on the page the answer to the query text is, as a map on the
tile grid; notes and evidence for ``explain``.

Two ways, chosen by the scorer in use:

* **learned** (weights whose ``text.ranker`` is set, e.g. the package's default weights): the answer ranker
  (:mod:`.ranker`) gives every OCR line a probability of holding the answer; each line is painted with
  ``1 + log(p) / sharpness`` (clipped to [0, 1]), grown by ``pad`` line heights (:func:`answer_map`).  With a
  ``text.extent`` model (:mod:`.extent`), the hull of each likely line and a neighbour that may continue its answer
  is painted the same way, at the pair's probability (:func:`answer_boxes`).
* **hand-set** (``weights="handset"``): lines matching the query's words or meaning, spread to where a field's
  value sits relative to them (:func:`.handset.relevance_map`).

With a ranker, the term also gives back every line's probability and every hull's
(:class:`~foveate.query.base.LikelyLines`), which selection reads to weigh its layouts, to complete the likely answer
first and to decide its floor.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import numpy as np

from ...channels.text.group import paint_boxes
from ...core.types import F32
from ...weights.defaults import QUERY_NEED, QUERY_WEIGHTS
from ..base import LikelyLines, QueryTerm, TermOutput
from .handset import relevance_map
from .layout import TextIndex, text_index
from .match import MATCH_THRESHOLD, LineMatch, match_lines, question_scores

if TYPE_CHECKING:
    from ...core.texture import Texture
    from ...weights.weights import Ranker, TextTerm, Weights
    from ..query import Query

_RECENT_LOCK = threading.Lock()

#: entries of a texture's recent text answers: a question's probabilities, extent and painted map (learned), or its
#: match and map (hand-set) -- the last 16 questions
RECENT_ANSWERS = 48


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
    from .extent import answer_regions  # torch: loaded with the first extent model, not with the registry

    return answer_regions(index, p, *question_scores(index, text), extent)


def ranked_extent(index: TextIndex, text: str, ranker, extent) -> tuple[np.ndarray, ...]:
    """:func:`answer_extent` on the ranker's probabilities (both cached per question and models)."""
    return _recent(
        index,
        ("extent", ranker, extent, text),
        lambda: answer_extent(index, text, np.asarray(answer_probabilities(index, text, ranker), np.float64), extent),
    )


def answer_boxes(index: TextIndex, text: str, ranker, extent=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What the learned text term paints for a question: ``(boxes (M, 4), probabilities (M,), heights (M,))`` -- every
    line with the ranker's probability, then, with an ``extent`` model, the hulls of likely lines with their
    neighbours (:func:`.extent.answer_regions`); a hull's height is the smaller of its two lines' (it is grown by that).
    The text term caches the map painted from them (:func:`text_query_map`), not the boxes."""
    p = np.asarray(answer_probabilities(index, text, ranker), np.float64)
    boxes, heights = index.boxes, index.boxes[:, 3] - index.boxes[:, 1]
    if extent is None or not len(p):
        return boxes, p, heights
    _, hb, hp, hh = ranked_extent(index, text, ranker, extent)
    return np.concatenate([boxes, hb]), np.concatenate([p, hp]), np.concatenate([heights, hh])


def answer_map(
    index: TextIndex,
    probs: np.ndarray,
    sharpness: float,
    pad: float,
    fill: float = 0.0,
    boxes: np.ndarray | None = None,
    heights: np.ndarray | None = None,
) -> np.ndarray:
    """Paint each line (or each of ``boxes``, ``heights`` their line heights) with
    ``clip(1 + log(p) / sharpness, 0, 1)``, its box grown by ``pad`` of its height on every side, a tile the box
    covers a fraction f of at that value times ``1 - fill * (1 - f)``
    (:func:`foveate.channels.text.group.paint_boxes`): (gh, gw) float32.
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


def text_query_map(texture: Texture, query: Query, weights: Weights | None = None) -> TermOutput | None:
    """The ``text`` query term: where the answer to the query text is (see the module docstring)."""
    if query.text is None:
        return None
    index = text_index(texture)
    if index is None:
        return None
    blind = "the prompts and saliency" if query.has_prompt else "the query-blind ranking (saliency)"
    if not index.lines:
        return TermOutput(
            np.zeros(index.grid, np.float32),
            (
                f"no text was found in this image (OCR), so the query text matches nothing; the selection follows "
                f"{blind}",
            ),
        )
    text = weights.text if weights is not None else None
    if text is not None and text.ranker is not None:
        return _learned(index, query.text, text, text.ranker, blind)
    m, out = _handset_match(index, query.text)
    notes: tuple[str, ...] = ()
    if not m.painted:
        i = int(np.argmax(m.score)) if len(m.score) else 0
        notes = (
            f"no OCR line matches the query text (closest: {index.lines[i].text[:60]!r}, score "
            f"{m.score[i]:.2f} < {MATCH_THRESHOLD}); the selection falls back to {blind}",
        )
    return TermOutput(out.copy(), notes)


def _learned(index: TextIndex, question: str, text: TextTerm, ranker: Ranker, blind: str) -> TermOutput:
    """The learned text term: the ranker's lines (and hulls) painted, and every line's (and hull's) probability."""
    p = answer_probabilities(index, question, ranker)
    i = int(np.argmax(p))
    notes: tuple[str, ...] = ()
    if p[i] < UNSURE_ANSWER:
        notes = (
            f"no OCR line looks like the answer (most likely: {index.lines[i].text[:60]!r}, probability "
            f"{p[i]:.2f}; on no line: {max(0.0, 1.0 - float(p.sum())):.2f}); the selection leans on {blind}",
        )
    extent, paint = text.extent, text.paint

    def make() -> F32:
        boxes, probs, heights = answer_boxes(index, question, ranker, extent)
        return answer_map(index, probs, *paint, boxes, heights)

    boxes = np.asarray(index.boxes, np.float64)
    heights, probs = (boxes[:, 3] - boxes[:, 1]) * text.height, np.asarray(p, np.float64)
    if extent is None:
        lines = LikelyLines(boxes, heights, probs)
    else:
        _, hb, hp, hh = ranked_extent(index, question, ranker, extent)
        lines = LikelyLines(boxes, heights, probs, hb, hh * text.height, hp)
    return TermOutput(_recent(index, ("map", ranker, extent, paint, question), make).copy(), notes, lines)


def _handset_match(index: TextIndex, text: str) -> tuple[LineMatch, np.ndarray]:
    """The hand-set match of ``text`` and the map painted from it (painting records the painted lines in the
    match, for ``explain``), cached in the index's recent answers."""

    def make() -> tuple[LineMatch, np.ndarray]:
        m = match_lines(index, text)
        return m, relevance_map(index, m)

    return _recent(index, ("match", text), make)


def text_evidence(texture: Texture, query: Query, weights: Weights | None = None) -> list[dict[str, Any]]:
    """For ``explain``: the OCR lines that drove the text term for this query, best first (with weights that have
    an answer ranker, its five most probable lines, then with an extent model the three most probable hulls of a line
    and a neighbour that continues its answer; else the hand-set matches and their spread)."""
    index = text_index(texture)
    if index is None or query.text is None or not index.lines:
        return []
    ranker = weights.text.ranker if weights is not None else None
    if ranker is not None:
        p = answer_probabilities(index, query.text, ranker)  # cached by the map
        top = np.argsort(-p, kind="stable")[:5]
        out = [
            {
                "term": "text",
                "relation": "answer",
                "text": index.lines[j].text,
                "box": list(index.lines[j].box),
                "probability": round(float(p[j]), 4),
            }
            for j in top
            if p[j] > 0
        ]
        extent = weights.text.extent if weights is not None else None
        if extent is not None:
            pairs, hulls, hp, _ = ranked_extent(index, query.text, ranker, extent)
            for k in np.argsort(-hp, kind="stable")[:3]:
                i, j = int(pairs[k, 0]), int(pairs[k, 1])
                if hp[k] >= 0.01:
                    out.append(
                        {
                            "term": "text",
                            "relation": "answer extent",
                            "text": f"{index.lines[i].text} | {index.lines[j].text}",
                            "box": [int(round(v)) for v in hulls[k]],
                            "probability": round(float(hp[k]), 4),
                        }
                    )
        return out
    m, _ = _handset_match(index, query.text)
    out, seen = [], set()
    for j, rel, v in sorted(m.painted, key=lambda t: -t[2]):
        if j in seen:  # a line reached several ways: keep the strongest
            continue
        seen.add(j)
        ln = index.lines[j]
        out.append(
            {
                "term": "text",
                "relation": rel,
                "text": ln.text,
                "box": list(ln.box),
                "value": round(v, 3),
                "lexical": round(float(m.lexical[j]), 3),
                "semantic": round(float(m.semantic[j]), 3),
                "cosine": round(float(m.cosine[j]), 3),
            }
        )
    return out


#: the text term's hand-set weights (:data:`foveate.weights.defaults.QUERY_WEIGHTS`, ``QUERY_NEED``)
TEXT_WEIGHT, TEXT_NEED = QUERY_WEIGHTS["text"], QUERY_NEED["text"]

TEXT = QueryTerm(
    "text",
    text_query_map,
    TEXT_WEIGHT,
    "OCR lines matching the query (lexical + MiniLM), spread to where a field's value sits",
    uses_text=True,
    evidence=text_evidence,
    need_weight=TEXT_NEED,
)
