"""One token budget across a document's pages.

1. Every page is scored for the query.  With the learned text term, a page's score is the log of its likeliest line's
   answer probability -- the ranker's softmax includes a "the answer is on no line" option, so these are absolute and
   the lines of all pages rank against each other -- plus its best line's lexical match and MiniLM cosine to the
   question and the question's cosine to the page's theme (the mean of its lines' embeddings), weighted
   (``PAGE_LEXICAL``, ``PAGE_COSINE`` in :mod:`foveate.weights.defaults`, ``PAGE_THEME`` in :mod:`.pagescore`, fitted
   on documents of training-split pages); the relevance is the softmax of the scores over the pages.  Without it (no
   text in the query, the hand-set weights, pages without text), the best tile score, as ``exp(score - the
   document's best)``.
2. The pages within ``share`` of the best page's relevance (at most ``max_focus`` of them) split the budget in
   proportion to their relevance; every other page gets a gist of ``gist`` tokens (the page resized uniformly) or
   nothing (``gist=0``, the default).
3. Each page spends its share with :func:`foveate.select`; the tokens carry their ``page``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.config import SelectConfig
from ..core.errors import BudgetError, QueryError
from ..core.texture import Texture
from ..query.query import Query
from ..query.scorer import Scorer, resolve_scorer
from ..query.text.embed import embed_query
from ..query.text.layout import text_index
from ..query.text.match import question_scores
from ..query.text.term import answer_probabilities
from ..selection.selection import Selection
from ..selection.selector import resolve_select_config, score_texture, select
from ..weights.defaults import PAGE_COSINE, PAGE_LEXICAL, PAGE_SHARE
from ..weights.weights import WeightsSpec, load_weights
from .pagescore import MATRIX_COLUMNS, PAGE_THEME, page_profile, profile_matrix
from .texture import DocumentTexture

#: selection.json schema version of a document's selection (a single image's stays at 1)
DOCUMENT_SCHEMA_VERSION = 2
DEFAULT_SHARE = PAGE_SHARE
DEFAULT_MAX_FOCUS = 3


@dataclass
class DocumentSelection:
    """The tokens chosen across a document's pages for one query.

    Attributes:
        pages: (page index, that page's :class:`Selection`) for every page that got tokens, in page order.
        page_sizes: (H, W) of every page of the document.
        relevance: (num_pages,) float64: each page's relevance for the query (see the module's docstring).
        relevance_kind: ``answer probability`` (the learned text term) or ``tile score``.
    """

    pages: list[tuple[int, Selection]]
    page_sizes: list[tuple[int, int]]
    relevance: np.ndarray
    relevance_kind: str
    budget: int
    query: Query
    texture_id: str
    patch_size: int
    timings_ms: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    explain: bool = False  # ``to_dict`` carries each page's evidence (with its page)

    def __len__(self) -> int:
        return sum(len(s) for _, s in self.pages)

    @property
    def token_pages(self) -> np.ndarray:
        """(K,) int64: the page of every token, in :meth:`to_dict`'s token order."""
        parts = [np.full(len(s), i, np.int64) for i, s in self.pages]
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    @property
    def token_levels(self) -> np.ndarray:
        parts = [s.levels.astype(np.int64) for _, s in self.pages]
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def page_share(self, page: int, level: int = 0) -> float:
        """Share of the tokens at ``level`` (level 0: full resolution) that are on ``page`` (0 when there are
        none): the page accuracy of the evaluation."""
        at = self.token_levels == level
        return float((self.token_pages[at] == page).mean()) if at.any() else 0.0

    def selection(self, page: int) -> Selection | None:
        """The selection on ``page`` (``None`` when it got no token)."""
        return next((s for i, s in self.pages if i == page), None)

    def to_dict(self) -> dict[str, Any]:
        """The ``selection.json`` document of a document (schema version 2, docs/selection-schema.md)."""
        tokens = []
        for i, s in self.pages:
            for t in s.to_dict()["tokens"]:
                tokens.append({"page": i, **t})
        return {
            "schema_version": DOCUMENT_SCHEMA_VERSION,
            "texture_id": self.texture_id,
            "pages": [{"width": w, "height": h} for h, w in self.page_sizes],
            "patch_size": self.patch_size,
            "budget": self.budget,
            "num_tokens": len(self),
            "query": self.query.to_dict(),
            "page_relevance": [round(float(r), 6) for r in self.relevance],
            "relevance_kind": self.relevance_kind,
            "page_selections": [
                {
                    "page": i,
                    "mode": s.mode,
                    "layout": s.layout,
                    "budget": s.budget,
                    "num_tokens": len(s),
                    "uniform_scale": round(float(s.scales[0]), 6) if s.layout == "uniform" and len(s) else None,
                    "num_levels": s.num_levels,
                    "num_tiles_full": s.num_tiles,
                }
                for i, s in self.pages
            ],
            "timings_ms": {k: round(v, 3) for k, v in self.timings_ms.items()},
            "notes": list(self.notes),
            **({"evidence": [{"page": i, **e} for i, s in self.pages for e in s.evidence]} if self.explain else {}),
            "tokens": tokens,
        }


def page_features(doc: DocumentTexture, question: str, ranker: Any) -> np.ndarray | None:
    """(num_pages, 5) float64: per page the log of its likeliest line's answer probability, its best lexical match
    and its best MiniLM cosine to ``question``, the cosine of the question to the page's theme (the mean of its lines'
    embeddings: what the page as a whole is about) and the question-by-profile term (:mod:`.pagescore`: how the
    question leans on the page's profile and on the four terms before; 0 without a fitted matrix); a page without
    lines: log 1e-6, 0, 0, 0, 0.  ``None`` when no page has a line.  The ranker's probabilities stay in each page's text
    index for the select that follows."""
    rows, any_lines = [], False
    q = embed_query(question).astype(np.float64)
    a = profile_matrix()
    lean = a.T @ q if a is not None else None  # how the question leans on each part of a page's profile and evidence
    for page in doc.pages:
        index = text_index(page)
        if index is None or not index.lines:
            rows.append((math.log(1e-6), 0.0, 0.0, 0.0, 0.0))
            continue
        any_lines = True
        p = answer_probabilities(index, question, ranker)
        lex, cos = question_scores(index, question)
        theme = index.embeddings.astype(np.float64).mean(0)
        g = float(theme @ q / max(float(np.linalg.norm(theme)), 1e-9))
        evidence = (math.log(max(float(p.max()), 1e-6)), float(lex.max()), float(cos.max()), g)
        prof = float(profile_row(page, evidence) @ lean) if lean is not None else 0.0
        rows.append((*evidence, prof))
    return np.asarray(rows, np.float64) if any_lines else None


def profile_row(page: Texture, evidence: Sequence[float]) -> np.ndarray:
    """``[profile | evidence]`` of a page (:data:`.pagescore.MATRIX_COLUMNS`): what the question leans on in the
    profile term, ``evidence`` being the page score's first four terms (:func:`page_features`); zeros for a page
    without lines.  The profile is computed once per page (kept with its text index), not per question."""
    index = text_index(page)
    if index is None or not index.lines:
        return np.zeros(len(MATRIX_COLUMNS))
    kind = index.cache.get("page_profile")
    if kind is None:
        kind = index.cache["page_profile"] = page_profile([ln.text for ln in index.lines], page.image_size)
    return np.concatenate([kind, np.asarray(evidence, np.float64)])


def page_scores(
    features: np.ndarray, lexical: float = PAGE_LEXICAL, cosine: float = PAGE_COSINE, theme: float = PAGE_THEME
) -> np.ndarray:
    """(num_pages,) relevance in [0, 1]: the softmax over pages of ``log p + lexical * lex + cosine * cos + theme *
    the theme cosine + the profile term`` (``features`` of :func:`page_features`; fewer columns: the first terms)."""
    w = np.array([1.0, lexical, cosine, theme, 1.0])[: features.shape[1]]
    z = features @ w
    e = np.exp(z - z.max())
    out: np.ndarray = e / e.sum()
    return out


def page_relevance(doc: DocumentTexture, query: Query, scorers: list[Scorer]) -> tuple[np.ndarray, str]:
    """(num_pages,) relevance of each page for ``query`` and its kind (see the module's docstring).  The page
    score needs only the ranker over each page's lines, not the painted maps nor the scorer over every tile; the tile
    scores the full scoring."""
    text = scorers[0].weights.text
    ranker = text.ranker if text is not None else None
    if query.text is not None and ranker is not None:
        feats = page_features(doc, query.text, ranker)
        if feats is not None:
            return page_scores(feats), "page score"
    best = []
    for page, scorer in zip(doc.pages, scorers):
        sc = score_texture(page, query, scorer)
        best.append(float(sc.score[0].max()) if sc.score[0].size else -math.inf)
    b = np.array(best, np.float64)
    return np.exp(b - b.max()), "tile score"


def allocate(
    relevance: np.ndarray, budget: int, covers: list[int], share: float, max_focus: int, gist: int
) -> tuple[dict[int, int], dict[int, int]]:
    """Tokens per page: the focus pages (within ``share`` of the best relevance, at most ``max_focus``) split what
    the gists leave in proportion to their relevance; a focus page whose part cannot hold its coarsest cover
    (``covers``) gives it to the others.  Pure: (focus page -> tokens, gist page -> tokens), pages without tokens
    left out."""
    order = np.argsort(-relevance, kind="stable")
    top = float(relevance[order[0]])
    focus = [int(i) for i in order[:max_focus] if top <= 0 or relevance[i] >= share * top]
    others = [i for i in range(len(relevance)) if i not in focus]
    gists = {i: gist for i in others} if gist > 0 and gist * len(others) <= budget // 3 else {}
    left = budget - sum(gists.values())
    while focus:
        w = np.array([max(float(relevance[i]), 1e-9) for i in focus])
        parts = np.floor(left * w / w.sum()).astype(int)
        parts[0] += left - int(parts.sum())  # the remainder to the best page
        short = [k for k, i in enumerate(focus) if parts[k] < covers[i]]
        if not short or len(focus) == 1:
            return {i: int(p) for i, p in zip(focus, parts)}, gists
        focus = [i for k, i in enumerate(focus) if k != short[-1]]
    return {}, gists


def select_document(
    doc: DocumentTexture,
    query: Any = None,
    budget: int | None = None,
    *,
    mode: str | None = None,
    config: SelectConfig | None = None,
    scorer: Scorer | None = None,
    weights: WeightsSpec = None,
    share: float = DEFAULT_SHARE,
    max_focus: int = DEFAULT_MAX_FOCUS,
    gist: int = 0,
    page: int | None = None,
    explain: bool = False,
    **overrides: Any,
) -> DocumentSelection:
    """Pick tokens for one query across a document's pages with one budget.

    Args:
        doc: from :func:`foveate.encode` on a PDF or TIFF, or :meth:`DocumentTexture.load`.
        query, budget, mode, config, scorer, weights: as :func:`foveate.select` (points and boxes need ``page``).
        share, max_focus: which pages share the budget (see the module's docstring).
        gist: tokens for each other page (0: nothing).
        page: spend the whole budget on this page (0-based): the caller knows where to look.
        explain: keep each focus page's evidence (:func:`foveate.select`'s ``explain``); ``to_dict`` lists it with
            its page.
    """
    if not isinstance(doc, DocumentTexture):
        raise QueryError(f"select_document needs a DocumentTexture, got {type(doc).__name__}")
    cfg = resolve_select_config(config, budget, mode, overrides)
    q = Query.coerce(query)
    if page is not None and not 0 <= page < doc.num_pages:
        raise QueryError(f"page {page} is outside the document's {doc.num_pages} pages (0-based)")
    if q.has_prompt and page is None:
        raise QueryError("points and boxes are in one page's pixels: give the page they are on (page=...)")
    if cfg.budget < 1:
        raise BudgetError(f"budget must be at least 1, got {cfg.budget}")
    t0 = time.perf_counter()
    w = load_weights(weights) if scorer is None else None
    scorers = [resolve_scorer(w, scorer, p.channels, p.device) for p in doc.pages]
    if page is not None:
        relevance, kind = np.zeros(doc.num_pages), "given page"
        relevance[page] = 1.0
        shares, gists = {page: cfg.budget}, dict[int, int]()
    else:
        relevance, kind = page_relevance(doc, q, scorers)
        covers = [p.level_shapes[-1][0] * p.level_shapes[-1][1] for p in doc.pages]
        shares, gists = allocate(relevance, cfg.budget, covers, share, max_focus, gist)
    t1 = time.perf_counter()
    pages: list[tuple[int, Selection]] = []
    notes: list[str] = []
    for i in sorted({**shares, **gists}):
        if i in gists:  # a gist: the page resized uniformly
            sel = select(doc.pages[i], q, gists[i], config=cfg, mode="uniform", scorer=scorers[i])
        else:
            sel = select(doc.pages[i], q, shares[i], config=cfg, scorer=scorers[i], explain=explain)
        pages.append((i, sel))
        notes.extend(f"page {i + 1}: {n}" for n in sel.notes)  # 1-based, as people count pages
    t2 = time.perf_counter()
    return DocumentSelection(
        pages,
        doc.page_sizes,
        relevance,
        kind,
        cfg.budget,
        q,
        doc.id,
        doc.patch_size,
        {"rank": (t1 - t0) * 1000.0, "select": (t2 - t1) * 1000.0, "total": (t2 - t0) * 1000.0},
        notes,
        explain,
    )
