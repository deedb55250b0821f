"""What a query term is (:class:`QueryTerm`), what it gives back (:class:`TermOutput`), and what the terms of one query
give together (:class:`QueryMaps`): the level-0 maps the scorer weighs, notes, and where the answer probably is
(:class:`LikelyLines`), which selection reads instead of asking the text term.

A term maps ``(texture, query, weights)`` to a level-0 map (gh, gw) in [-1, 1] -- as a bare array or inside a
:class:`TermOutput` -- or ``None`` when it does not apply; ``weights`` is the relevance model in use
(:class:`foveate.weights.Weights`), from which a term with learned parts reads them (the text term its answer ranker).
The registry and :func:`~foveate.query.terms.query_maps` are in :mod:`.terms`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core import ops
from ..core.types import F32, F64

if TYPE_CHECKING:
    import torch

    from ..core.texture import Texture
    from ..weights.weights import Weights
    from .query import Query


def _no_boxes() -> F64:
    return np.zeros((0, 4), np.float64)


def _no_values() -> F64:
    return np.zeros(0, np.float64)


@dataclass(frozen=True)
class LikelyLines:
    """Where the answer to a question probably is, as the learned text term read it: every OCR line of the page with
    the answer ranker's probability that it holds the answer, and, with an extent model, the hulls of likely lines
    with a neighbour that may continue their answer.  ``auto`` weighs its layouts by them, the top-k layout completes
    them first, and the floor gate reads the lines' best probability (:mod:`foveate.selection.auto`,
    :mod:`foveate.selection.floor`).

    Attributes:
        boxes: (N, 4) float64 line boxes in source pixels.
        heights: (N,) float64 estimated height of the print in each box (the box height times the weights'
            ``text.height``).
        probs: (N,) float64 probabilities (they sum to at most 1: the rest is "on no line").
        hulls, hull_heights, hull_probs: (M, 4), (M,), (M,) the extent's hulls (:func:`.text.extent.answer_regions`:
            a likely line ``i`` and a neighbour ``j``, at ``p_i q_ij``; a hull's print is the smaller line's); empty
            without an extent model.
    """

    boxes: F64
    heights: F64
    probs: F64
    hulls: F64 = field(default_factory=_no_boxes)
    hull_heights: F64 = field(default_factory=_no_values)
    hull_probs: F64 = field(default_factory=_no_values)

    @property
    def top(self) -> float:
        """The probability of the likeliest line (0 for a page without lines)."""
        return float(self.probs.max()) if len(self.probs) else 0.0

    @cached_property
    def regions(self) -> tuple[F64, F64, F64]:
        """``(boxes, heights, probabilities)`` of the lines, then the hulls: what a layout should make legible (made
        once: ``auto`` reads it for every layout it weighs)."""
        if not len(self.hull_probs):
            return self.boxes, self.heights, self.probs
        return (
            np.concatenate([self.boxes, self.hulls]),
            np.concatenate([self.heights, self.hull_heights]),
            np.concatenate([self.probs, self.hull_probs]),
        )


@dataclass(frozen=True)
class TermOutput:
    """What a term gives back: its map (``None``: the term does not apply), notes for ``Selection.notes``, and for
    the learned text term its likely answer lines."""

    map: F32 | None
    notes: tuple[str, ...] = ()
    lines: LikelyLines | None = None


#: ``fn(texture, query, weights) -> map | TermOutput | None``
TermFn = Callable[["Texture", "Query", "Weights"], F32 | TermOutput | None]
#: ``evidence(texture, query, weights) -> [{"term", "relation", "text", "box", ...}]``
EvidenceFn = Callable[["Texture", "Query", "Weights"], list[dict[str, Any]]]


@dataclass(frozen=True)
class QueryTerm:
    """A query-dependent level-0 map.

    Attributes:
        name: registry key; the weights name the term's weight by it.
        fn: ``fn(texture, query, weights) -> (gh, gw) float32 in [-1, 1] | TermOutput | None``.
        weight: the term's weight in the score, for weights that do not name it (the built-ins' hand-set weights are
            :data:`foveate.weights.defaults.QUERY_WEIGHTS`).
        description: one line for the docs.
        uses_text: the term reads ``query.text`` (so a text query is not silently ignored).
        evidence: optional ``evidence(texture, query, weights) -> [dict]``: what drove the map (e.g. the matched OCR
            lines, each with a ``box``), reported by ``select(..., explain=True)``.
        need_weight: weight of the map in the need for detail: a term that knows its region must be read (OCR found
            text there) makes the quadtree refine it even where the pixels look flat (label/value margins, light ink).
    """

    name: str
    fn: TermFn
    weight: float
    description: str
    uses_text: bool = False
    evidence: EvidenceFn | None = None
    need_weight: float = 0.0

    def output(self, texture: Texture, query: Query, weights: Weights) -> TermOutput:
        """The term evaluated, as a :class:`TermOutput` (a bare map is wrapped)."""
        out = self.fn(texture, query, weights)
        if isinstance(out, TermOutput):
            return out
        return TermOutput(None if out is None else np.asarray(out, np.float32))


@dataclass
class QueryMaps:
    """The query terms evaluated for one (texture, query): names, level-0 maps, notes for ``explain``, and the likely
    answer lines when the learned text term ran."""

    names: list[str] = field(default_factory=list)
    maps: list[F32] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    lines: LikelyLines | None = None

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
