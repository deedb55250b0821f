"""The hand-set relevance model: every constant ``select`` uses when no trained weights say otherwise, in one place.

``foveate train`` learns all of them from annotated data (:mod:`foveate.train`); a weights file lists what it
learned, and a channel or query term it does not list keeps the value here (:mod:`.weights`).  The scorer that applies
them is :class:`foveate.query.scorer.Scorer`::

    score = bias + w . [mean | max] + a . query_maps          (a 1x1 convolution over the texture)
    need = floor + max(0, v . [mean | max] + u . query_maps)  (how much a tile gains from a finer level)
"""

from __future__ import annotations

#: channel -> (weight on the mean-mip, weight on the max-mip).  Channels not listed weigh 0.
DEFAULT_WEIGHTS: dict[str, tuple[float, float]] = {
    "saliency": (0.5, 1.0),  # what stands out
    "edges_dark": (0.0, 0.4),  # ink, strokes, contours (max: a small detail survives coarse levels)
    "edges_light": (0.0, 0.4),
    "highpass": (0.5, 0.0),  # fine texture
    "eccentricity": (-0.5, 0.0),  # mild centre bias
    "edge_distance": (-0.5, 0.0),  # far from any edge = flat = little to see
    "boundaries": (0.0, 0.3),  # object outlines
    "motion": (0.5, 0.5),  # video: what moves
    "prev_relevance": (0.5, 0.0),  # video: what mattered a frame ago (warped)
    "fixations": (0.2, 0.0),  # video: what was looked at
    "text": (0.5, 1.0),  # OCR text regions
    "text_density": (0.0, 0.5),  # small, dense print (characters per tile)
    "attn_vlm": (1.0, 0.5),  # caller-supplied maps
    "attn_accum": (0.5, 0.0),
    "gaze": (1.0, 0.5),
}
#: weights for caller channels attached under a new name (``user:<name>``)
USER_CHANNEL_WEIGHT = (1.0, 0.5)

#: channel -> weight on the max-mip for the need for detail
DEFAULT_NEED: dict[str, float] = {
    "edges_dark": 0.5,
    "edges_light": 0.5,
    "highpass": 1.0,
    "lowpass": 0.5,
    "text": 1.0,
    "boundaries": 0.3,
    "text_density": 2.0,  # small print must reach level 0 to stay legible
}
NEED_FLOOR = 0.05

#: Scorer weight of each built-in query term (its map is in [-1, 1] or [0, 1]).  A full text match adds 10 to the
#: log-relevance and a box prompt 4, so the matched region outranks every unrelated line of print (the text weight
#: was tuned on FUNSD from 4: docs/lab/journal.md, "Hand-set weights on FUNSD and COCO"); the emphasis rule is a clear
#: but secondary push; the semantic cosine map a moderate one.
QUERY_WEIGHTS: dict[str, float] = {"prompt": 4.0, "text": 10.0, "emphasis": 1.5, "semantic": 2.0}
#: Weight of each query term's map in the need for detail.  What the text term paints is text to be read, so it is
#: refined to full resolution even where a tile only grazes the ink.
QUERY_NEED: dict[str, float] = {"text": 8.0}

#: Levels a level prior can hold (EncodeConfig.max_levels is at most 10).
MAX_LEVELS = 10

#: The learned text term paints a line with value 1 + log(p) / TEXT_SHARPNESS (clipped to [0, 1]), p the ranker's
#: probability, grown by TEXT_PAD line heights: with query weight a, relevance ~ p ** (a / 10).  A tile the grown box
#: covers a fraction f of gets that value times 1 - TEXT_FILL (1 - f): with TEXT_FILL 0 every tile it touches gets the
#: full value (weights files that do not name a fill).
TEXT_SHARPNESS, TEXT_PAD, TEXT_FILL = 10.0, 0.25, 0.0
#: The height of the print an OCR line box holds, as a share of the box's height (the boxes hug ascenders, descenders
#: and a margin): the ``auto`` mode's legibility estimate.  ``foveate train`` measures it on its training pages
#: (annotated text heights against the OCR boxes of the answer lines); this is the value for files without one.
TEXT_HEIGHT = 0.7

#: A document's page score (:mod:`foveate.document.select`): ``log p + lexical * w_lex + cosine * w_cos`` over the
#: page's best line (p the answer ranker's probability, the lexical match and MiniLM cosine of the question), plus
#: the page theme's term (``foveate.document.pagescore.PAGE_THEME``), and the share of the best page's softmax a page
#: needs to share the budget.  Fitted on documents of training-split pages, chosen among the best there on documents
#: of validation-split pages (``python scripts/eval_documents.py --split train --fit``; EVAL.md, "Documents").
PAGE_LEXICAL, PAGE_COSINE, PAGE_SHARE = 8.0, 4.0, 0.9
