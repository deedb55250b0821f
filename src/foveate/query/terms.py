"""Query terms: what a query turns into on the texture's grid.

Query terms are a registry (:func:`register_query_term`): a term maps ``(texture, query)`` to a level-0 map
(gh, gw) in [-1, 1], or ``None`` when it does not apply.  This module registers ``prompt`` (SAM-style points and
boxes); the text, emphasis and semantic terms register themselves from their own modules
(``foveate.query.text``, ``foveate.query.emphasis``, ``foveate.query.semantic``).  :func:`query_maps` evaluates
them for one (texture, query); the :class:`~foveate.query.scorer.Scorer` weighs the maps.  Importing this module
imports those three (the bottom of this file), and :data:`QUERY_TERMS` keeps the built-ins in the order of
:data:`BUILTIN_TERMS`, which the scorer's weights follow, whatever a program imported first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from .._lazy import lazy_module
from ..core import ops

cv2 = lazy_module("cv2")

if TYPE_CHECKING:
    import torch

    from ..core.texture import Texture
    from .query import Query


@dataclass(frozen=True)
class QueryTerm:
    """A query-dependent level-0 map.  ``fn(texture, query, notes) -> (gh, gw) float32 in [-1, 1] | None``.

    ``evidence(texture, query) -> [dict]``, optional: what drove the map (e.g. the matched OCR lines, each with
    a ``box``), reported by ``select(..., explain=True)``."""

    name: str
    fn: Callable[[Texture, Query, list], np.ndarray | None]
    weight: float
    description: str
    uses_text: bool = False  # the term reads ``query.text`` (so a text query is not silently ignored)
    evidence: Callable[[Texture, Query], list[dict]] | None = None
    #: weight of the map in the need for detail: a term that knows its region must be read (OCR found text
    #: there) makes the quadtree refine it even where the pixels look flat (label/value margins, light ink)
    need_weight: float = 0.0
    #: ``fn`` takes a fourth argument and ``evidence`` a third, the :class:`~foveate.query.scorer.Scorer` in use (a
    #: term with learned parts of its own reads them from it, e.g. the ``text`` term's answer ranker)
    wants_scorer: bool = False


QUERY_TERMS: dict[str, QueryTerm] = {}

#: the built-in terms, in the order :data:`QUERY_TERMS` keeps them (whatever was imported first); others follow
BUILTIN_TERMS = ("prompt", "text", "emphasis", "semantic")


def register_query_term(term: QueryTerm) -> QueryTerm:
    QUERY_TERMS[term.name] = term
    rank = {name: i for i, name in enumerate(BUILTIN_TERMS)}
    ordered = sorted(QUERY_TERMS.items(), key=lambda item: rank.get(item[0], len(rank)))  # stable: others keep theirs
    QUERY_TERMS.clear()
    QUERY_TERMS.update(ordered)
    return term


def prompt_map(texture: Texture, query: Query, notes: list | None = None) -> np.ndarray | None:
    """SAM-style prompts on the level-0 grid: a Gaussian bump (sigma = 1.5 tiles) at each point (negative for
    label 0) and, for each box, the fraction of each tile inside it, softened by a one-tile falloff."""
    if not query.has_prompt:
        return None
    gh, gw = texture.level_shapes[0]
    p = float(texture.patch_size)
    cy = (np.arange(gh) + 0.5) * p
    cx = (np.arange(gw) + 0.5) * p
    out = np.zeros((gh, gw), np.float32)
    for (x, y), label in zip(query.points, query.point_labels):
        sigma = 1.5 * p
        bump = np.exp(-((cy[:, None] - y) ** 2 + (cx[None, :] - x) ** 2) / (2 * sigma * sigma))
        out = np.maximum(out, bump) if label == 1 else out - bump
    h, w = texture.image_size
    for x0, y0, x1, y1 in query.boxes:
        x0, x1 = max(x0, 0.0), min(x1, float(w))
        y0, y1 = max(y0, 0.0), min(y1, float(h))
        fy = np.clip(np.minimum(np.arange(gh) * p + p, y1) - np.maximum(np.arange(gh) * p, y0), 0, p) / p
        fx = np.clip(np.minimum(np.arange(gw) * p + p, x1) - np.maximum(np.arange(gw) * p, x0), 0, p) / p
        inside = np.outer(fy, fx).astype(np.float32)
        soft = cv2.GaussianBlur(inside, (0, 0), 1.0, borderType=cv2.BORDER_REPLICATE) * 0.5
        out = np.maximum(out, np.maximum(inside, soft))
    return np.clip(out, -1.0, 1.0)


register_query_term(QueryTerm("prompt", prompt_map, 4.0, "SAM-style point and box prompts"))


@dataclass
class QueryMaps:
    """The query terms evaluated for one (texture, query): names, level-0 maps, and notes for ``explain``."""

    names: list[str] = field(default_factory=list)
    maps: list[np.ndarray] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def flat(self, texture: Texture, device: torch.device) -> torch.Tensor | None:
        """(N_total, Q) float32: each map max-pooled up the pyramid and flattened like ``flat_features``."""
        if not self.maps:
            return None
        import torch

        from ..core.device import COMPUTE_DTYPE

        maxes = [np.stack(self.maps, axis=-1).astype(np.float32)]
        for _ in range(texture.num_levels - 1):  # the max-mip alone (what build_mips' maxes would be)
            maxes.append(ops.max_down(maxes[-1]))
        flat = np.concatenate([m.reshape(-1, m.shape[-1]) for m in maxes], axis=0)
        return torch.from_numpy(flat).to(device=device, dtype=COMPUTE_DTYPE)


def query_maps(texture: Texture, query: Query, terms: Sequence[str] | None = None, scorer: Any = None) -> QueryMaps:
    """Evaluate the registered query terms (or ``terms``) for this texture and query; ``scorer`` is passed to the
    terms that want it (``QueryTerm.wants_scorer``)."""
    out = QueryMaps()
    for name in terms if terms is not None else list(QUERY_TERMS):
        term = QUERY_TERMS[name]
        m = term.fn(texture, query, out.notes, scorer) if term.wants_scorer else term.fn(texture, query, out.notes)
        if m is not None:
            out.names.append(name)
            out.maps.append(np.asarray(m, np.float32))
    if query.text is not None and not any(QUERY_TERMS[n].uses_text for n in out.names):
        out.notes.append("the query text is not used: no text-aware signal is available for this texture; "
                         "the selection follows saliency and prompts (query-blind)")
        out.notes.extend(texture.extras.get("notes", ()))  # why a group is absent (e.g. the OCR failed)
    return out


# the built-in terms after ``prompt``, in this order (each module imports this one and registers its term)
from .text import term as _text_term  # noqa: E402,F401
from . import emphasis as _emphasis, semantic as _semantic  # noqa: E402,F401
