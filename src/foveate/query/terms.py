"""The query-term registry: what a query turns into on the texture's grid.

The built-in terms are registered here, in this order (the order a scorer's query weights follow): ``prompt``
(SAM-style points and boxes, :mod:`.prompt`), ``text`` (where the answer to the question is, :mod:`.text.term`),
``emphasis`` (colour and reading words -> channels, :mod:`.emphasis`) and ``semantic`` (image-text embeddings per
tile, :mod:`.semantic`).  A new term is one module defining a :class:`~.base.QueryTerm` and one
:func:`register_query_term` line.  :func:`query_maps` evaluates the terms for one (texture, query); the
:class:`~foveate.query.scorer.Scorer` weighs the maps.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .base import LikelyLines, QueryMaps, QueryTerm, TermOutput
from .emphasis import EMPHASIS
from .prompt import PROMPT, prompt_map
from .semantic import SEMANTIC
from .text.term import TEXT

if TYPE_CHECKING:
    from ..core.texture import Texture
    from ..weights.weights import Weights
    from .query import Query

__all__ = [
    "BUILTIN_TERMS",
    "QUERY_TERMS",
    "LikelyLines",
    "QueryMaps",
    "QueryTerm",
    "TermOutput",
    "list_terms",
    "prompt_map",
    "query_maps",
    "register_query_term",
]

QUERY_TERMS: dict[str, QueryTerm] = {}


def register_query_term(term: QueryTerm) -> QueryTerm:
    """Add a term (a term of a registered name replaces it, in its place)."""
    QUERY_TERMS[term.name] = term
    return term


def list_terms() -> list[str]:
    """The registered terms, in the order a scorer's query weights follow."""
    return list(QUERY_TERMS)


for _term in (PROMPT, TEXT, EMPHASIS, SEMANTIC):
    register_query_term(_term)
#: the built-in terms, in registration order
BUILTIN_TERMS = tuple(QUERY_TERMS)


def query_maps(
    texture: Texture, query: Query, weights: Weights | None = None, terms: Sequence[str] | None = None
) -> QueryMaps:
    """Evaluate the registered query terms (or ``terms``) for this texture and query under ``weights`` (default: the
    hand-set weights, whose text term matches words and meaning instead of ranking lines)."""
    if weights is None:
        from ..weights.weights import Weights

        weights = Weights.handset()
    out = QueryMaps()
    for name in terms if terms is not None else list(QUERY_TERMS):
        result = QUERY_TERMS[name].output(texture, query, weights)
        out.notes.extend(result.notes)
        if result.lines is not None:
            out.lines = result.lines
        if result.map is not None:
            out.names.append(name)
            out.maps.append(result.map)
    if query.text is not None and not any(QUERY_TERMS[n].uses_text for n in out.names):
        out.notes.append(
            "the query text is not used: no text-aware signal is available for this texture; "
            "the selection follows saliency and prompts (query-blind)"
        )
        out.notes.extend(texture.extras.get("notes", ()))  # why a group is absent (e.g. the OCR failed)
    return out
