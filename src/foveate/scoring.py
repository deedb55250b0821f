"""Relevance: a query, the query terms it turns into, and the :class:`Scorer` that fuses them with the texture.

For every tile at every level the scorer reads the tile's mean-mip and max-mip channels and the query maps::

    score = bias + w . [mean | max] + a . query_maps          (a 1x1 convolution over the texture)
    relevance = exp(score)
    need = floor + max(0, v . [mean | max] + u . query_maps)  (how much a tile gains from a finer level)

The quadtree splits the tile with the highest ``relevance * need * (2**level) ** area_exponent``; the top-k
cascade ranks by ``score``.  Default weights (``DEFAULT_WEIGHTS``, ``DEFAULT_NEED``, query term weights) are
hand-set and documented below; they are ``nn.Parameter`` s, so a scorer can be trained later and passed in.

Query terms are a registry (:func:`register_query_term`): a term maps ``(texture, query)`` to a level-0 map
(gh, gw) in [-1, 1], or ``None`` when it does not apply.  The core registers ``prompt`` (SAM-style points and
boxes); text and semantic terms register themselves from their own modules.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import cv2
import numpy as np
import torch
from torch import nn

from . import ops
from .device import COMPUTE_DTYPE
from .errors import QueryError

if TYPE_CHECKING:
    from .texture import Texture

#: Longest query text kept (characters); longer text is truncated, and the selection says so.
MAX_QUERY_CHARS = 2000

#: channel -> (weight on the mean-mip, weight on the max-mip).  Channels not listed weigh 0.
DEFAULT_WEIGHTS: dict[str, tuple[float, float]] = {
    "saliency": (0.5, 1.0),          # what stands out
    "edges_dark": (0.0, 0.4),        # ink, strokes, contours (max: a small detail survives coarse levels)
    "edges_light": (0.0, 0.4),
    "highpass": (0.5, 0.0),          # fine texture
    "eccentricity": (-0.5, 0.0),     # mild centre bias
    "edge_distance": (-0.5, 0.0),    # far from any edge = flat = little to see
    "boundaries": (0.0, 0.3),        # object outlines
    "motion": (0.5, 0.5),            # video: what moves
    "prev_relevance": (0.5, 0.0),    # video: what mattered a frame ago (warped)
    "fixations": (0.2, 0.0),         # video: what was looked at
    "text": (0.5, 1.0),              # OCR text regions
    "text_density": (0.0, 0.5),      # small, dense print (characters per tile)
    "attn_vlm": (1.0, 0.5),          # caller-supplied maps
    "attn_accum": (0.5, 0.0),
    "gaze": (1.0, 0.5),
}
#: weights for caller channels attached under a new name (``user:<name>``)
USER_CHANNEL_WEIGHT = (1.0, 0.5)

#: channel -> weight on the max-mip for the need for detail
DEFAULT_NEED: dict[str, float] = {
    "edges_dark": 0.5, "edges_light": 0.5, "highpass": 1.0, "lowpass": 0.5, "text": 1.0, "boundaries": 0.3,
    "text_density": 2.0,  # small print must reach level 0 to stay legible
}
NEED_FLOOR = 0.05


# ----------------------------------------------------------------------------------------------------------
# Queries


@dataclass(frozen=True)
class Query:
    """What a user asks about: text and/or SAM-style prompts, in source-image pixels.

    Attributes:
        text: free text ("what is the total?"); may be ``None``.
        points: ``(x, y)`` pixel positions.
        point_labels: one per point, 1 = look here (default), 0 = not here (SAM's convention).
        boxes: ``(x0, y0, x1, y1)`` pixel boxes to look inside.
    """

    text: str | None = None
    points: tuple[tuple[float, float], ...] = ()
    point_labels: tuple[int, ...] = ()
    boxes: tuple[tuple[float, float, float, float], ...] = ()

    def __post_init__(self) -> None:
        try:
            pts = tuple((float(x), float(y)) for x, y in self.points)
            boxes = tuple(tuple(float(v) for v in b) for b in self.boxes)
            labels = tuple(int(v) for v in self.point_labels) if self.point_labels else (1,) * len(pts)
        except (TypeError, ValueError) as exc:
            raise QueryError(f"points must be (x, y) pairs and boxes (x0, y0, x1, y1) numbers: {exc}") from None
        if any(len(b) != 4 for b in boxes):
            raise QueryError("every box must have four numbers: x0, y0, x1, y1")
        if len(labels) != len(pts):
            raise QueryError(f"{len(labels)} point labels for {len(pts)} points")
        if any(v not in (0, 1) for v in labels):
            raise QueryError("point labels must be 1 (look here) or 0 (not here)")
        if any(not all(math.isfinite(v) for v in p) for p in pts + boxes):
            raise QueryError("points and boxes must be finite numbers")
        text = self.text
        if text is not None:
            if not isinstance(text, str):
                raise QueryError(f"query text must be a string, got {type(text).__name__}")
            text = " ".join(text.split()) or None
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "points", pts)
        object.__setattr__(self, "point_labels", labels)
        object.__setattr__(self, "boxes", boxes)

    @classmethod
    def coerce(cls, query: Any) -> Query:
        """``None`` -> empty query, ``str`` -> text query, ``dict`` -> fields, ``Query`` -> itself."""
        if query is None:
            return cls()
        if isinstance(query, Query):
            return query
        if isinstance(query, str):
            return cls(text=query)
        if isinstance(query, Mapping):
            unknown = set(query) - {"text", "points", "point_labels", "boxes"}
            if unknown:
                raise QueryError(f"unknown query field(s) {sorted(unknown)}; use text, points, point_labels, boxes")
            return cls(**query)
        raise QueryError(f"cannot read a query from {type(query).__name__}; pass a string, a dict or a Query")

    @property
    def is_empty(self) -> bool:
        return self.text is None and not self.points and not self.boxes

    @property
    def has_prompt(self) -> bool:
        return bool(self.points or self.boxes)

    def validate(self, image_size: tuple[int, int]) -> None:
        """Points must lie inside the image and boxes must overlap it (``QueryError`` otherwise)."""
        h, w = image_size
        for x, y in self.points:
            if not (0 <= x <= w and 0 <= y <= h):
                raise QueryError(f"point ({x:g}, {y:g}) is outside the {w}x{h} image")
        for x0, y0, x1, y1 in self.boxes:
            if x1 <= x0 or y1 <= y0:
                raise QueryError(f"box ({x0:g}, {y0:g}, {x1:g}, {y1:g}) is empty: need x0 < x1 and y0 < y1")
            if x1 <= 0 or y1 <= 0 or x0 >= w or y0 >= h:
                raise QueryError(f"box ({x0:g}, {y0:g}, {x1:g}, {y1:g}) lies outside the {w}x{h} image")

    def to_dict(self) -> dict:
        d: dict[str, Any] = {"text": self.text}
        if self.points:
            d["points"] = [list(p) for p in self.points]
            d["point_labels"] = list(self.point_labels)
        if self.boxes:
            d["boxes"] = [list(b) for b in self.boxes]
        return d


# ----------------------------------------------------------------------------------------------------------
# Query terms


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


QUERY_TERMS: dict[str, QueryTerm] = {}


def register_query_term(term: QueryTerm) -> QueryTerm:
    QUERY_TERMS[term.name] = term
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
        x0 = np.stack(self.maps, axis=-1).astype(np.float32)
        _, maxes, _ = ops.build_mips(x0, texture.coverage[0].cpu().numpy(), texture.num_levels)
        flat = np.concatenate([m.reshape(-1, m.shape[-1]) for m in maxes], axis=0)
        return torch.from_numpy(flat).to(device=device, dtype=COMPUTE_DTYPE)


def query_maps(texture: Texture, query: Query, terms: Sequence[str] | None = None) -> QueryMaps:
    """Evaluate the registered query terms (or ``terms``) for this texture and query."""
    out = QueryMaps()
    for name in terms if terms is not None else list(QUERY_TERMS):
        term = QUERY_TERMS[name]
        m = term.fn(texture, query, out.notes)
        if m is not None:
            out.names.append(name)
            out.maps.append(np.asarray(m, np.float32))
    if query.text is not None and not any(QUERY_TERMS[n].uses_text for n in out.names):
        out.notes.append("the query text is not used: no text-aware signal is available for this texture; "
                         "the selection follows saliency and prompts (query-blind)")
    return out


# ----------------------------------------------------------------------------------------------------------
# Scorer


class Scorer(nn.Module):
    """Per-channel weights over [mean | max] (a 1x1 convolution) + query-term weights -> score and need.

    Args:
        channels: the texture's channel names (weights are looked up by name, so any preset works).
        weights: channel -> (mean weight, max weight); defaults to ``DEFAULT_WEIGHTS``.
        need: channel -> max-mip weight for the need for detail; defaults to ``DEFAULT_NEED``.
        query_weights: query term -> weight; defaults to each registered term's weight.
        query_need: query term -> weight in the need for detail; defaults to each term's ``need_weight``.
        bias: constant added to every score.
    """

    def __init__(self, channels: Sequence[str], weights: Mapping[str, tuple[float, float]] | None = None,
                 need: Mapping[str, float] | None = None, query_weights: Mapping[str, float] | None = None,
                 bias: float = 0.0, need_floor: float = NEED_FLOOR,
                 query_need: Mapping[str, float] | None = None) -> None:
        super().__init__()
        self.channels = tuple(channels)
        weights = DEFAULT_WEIGHTS if weights is None else weights
        need = DEFAULT_NEED if need is None else need
        c = len(self.channels)
        w = torch.zeros(2 * c)
        v = torch.zeros(2 * c)
        for i, name in enumerate(self.channels):
            wm, wx = weights.get(name, USER_CHANNEL_WEIGHT if name.startswith("user:") else (0.0, 0.0))
            w[i], w[c + i] = wm, wx
            v[c + i] = need.get(name, 0.0)
        self.weight = nn.Parameter(w)
        self.need_weight = nn.Parameter(v)
        self.bias = nn.Parameter(torch.tensor(float(bias)))
        qw = {name: t.weight for name, t in QUERY_TERMS.items()}
        qw.update(query_weights or {})
        self.query_names = tuple(qw)
        self.query_weight = nn.Parameter(torch.tensor([qw[n] for n in self.query_names], dtype=torch.float32))
        qn = {name: t.need_weight for name, t in QUERY_TERMS.items()}
        qn.update(query_need or {})
        self.query_need = nn.Parameter(torch.tensor([qn.get(n, 0.0) for n in self.query_names], dtype=torch.float32))
        self.need_floor = float(need_floor)

    def forward(self, feats: torch.Tensor, qmaps: torch.Tensor | None = None,
                qnames: Sequence[str] = ()) -> tuple[torch.Tensor, torch.Tensor]:
        """Args:
            feats: (N, 2C) [mean | max] features.  qmaps: (N, Q) query maps named ``qnames``.
        Returns:
            ``(score, need)``, each (N,).
        """
        score = feats @ self.weight.to(feats) + self.bias.to(feats)
        need = feats @ self.need_weight.to(feats)
        if qmaps is not None and len(qnames):
            idx = torch.tensor([self.query_names.index(n) for n in qnames], device=feats.device)
            score = score + qmaps @ self.query_weight.to(feats)[idx]
            need = need + qmaps @ self.query_need.to(feats)[idx]
        need = self.need_floor + torch.clamp(need, min=0.0)
        return score, need

    def bound(self, feats: torch.Tensor, qmaps: torch.Tensor | None = None,
              qnames: Sequence[str] = ()) -> torch.Tensor:
        """Optimistic estimate of the best level-0 score under each tile, for the top-k cascade's pruning.

        At level 0 mean and max are equal, so a level-0 tile scores ``(w_mean + w_max) . f``.  Under a coarse
        tile the best descendant scores at most ``sum(relu(w0) * max) + sum(min(w0, 0) * min)``; the min-mip is
        not stored, so the mean stands in for it (exact for non-negative weights).  (N, 2C) -> (N,).
        """
        c = len(self.channels)
        w0 = self.weight[:c] + self.weight[c:]
        w_opt = torch.cat([torch.clamp(w0, max=0.0), torch.clamp(w0, min=0.0)]).to(feats)
        est = feats @ w_opt + self.bias.to(feats)
        if qmaps is not None and len(qnames):
            idx = torch.tensor([self.query_names.index(n) for n in qnames], device=feats.device)
            est = est + qmaps @ self.query_weight.to(feats)[idx]
        return est

    def evaluate(self, feats: torch.Tensor, qmaps: torch.Tensor | None = None,
                 qnames: Sequence[str] = ()) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Inference for ``select``: ``(score, need, bound)`` as (N,) float32 NumPy arrays.

        Same numbers as :meth:`forward` and :meth:`bound`.  On the CPU this is a single-threaded NumPy product:
        for a product this small, torch's intra-op threads cost 10x (2 ms -> 20+ ms) on a busy 2-core machine.
        """
        if feats.device.type != "cpu":
            with torch.inference_mode():
                score, need = self(feats, qmaps, qnames)
                bound = self.bound(feats, qmaps, qnames)
            return tuple(t.float().cpu().numpy() for t in (score, need, bound))  # type: ignore[return-value]
        c = len(self.channels)
        w = self.weight.detach().float().numpy()
        w0 = w[:c] + w[c:]
        mat = np.stack([w, self.need_weight.detach().float().numpy(),
                        np.concatenate([np.minimum(w0, 0.0), np.maximum(w0, 0.0)])], axis=1)
        prod = np.einsum("ij,jk->ik", feats.numpy(), mat)  # einsum: no BLAS threads
        bias = float(self.bias.detach())
        q = qn = 0.0
        if qmaps is not None and len(qnames):
            idx = [self.query_names.index(n) for n in qnames]
            a = self.query_weight.detach().float().numpy()[idx]
            q = np.einsum("ij,j->i", qmaps.numpy(), a)
            qn = np.einsum("ij,j->i", qmaps.numpy(), self.query_need.detach().float().numpy()[idx])
        score = (prod[:, 0] + bias + q).astype(np.float32)
        need = (self.need_floor + np.maximum(prod[:, 1] + qn, 0.0)).astype(np.float32)
        bound = (prod[:, 2] + bias + q).astype(np.float32)
        return score, need, bound

    def explain(self, feats: torch.Tensor, qmaps: torch.Tensor | None, qnames: Sequence[str],
                rows: torch.Tensor) -> dict[str, float]:
        """Mean contribution of each channel and query term to the scores of ``rows`` (for ``--explain``)."""
        c = len(self.channels)
        f = feats[rows]
        contrib = (f * self.weight.to(f)).reshape(len(rows), 2, c).sum(1).mean(0)
        out = {name: float(contrib[i]) for i, name in enumerate(self.channels) if float(contrib[i]) != 0.0}
        if qmaps is not None:
            for j, n in enumerate(qnames):
                out[f"query:{n}"] = float((qmaps[rows, j] * self.query_weight[self.query_names.index(n)]).mean())
        return dict(sorted(out.items(), key=lambda kv: -abs(kv[1])))


_DEFAULT_SCORERS: dict[tuple, Scorer] = {}


def default_scorer(channels: Sequence[str], device: torch.device) -> Scorer:
    """The default-weight scorer for a channel layout (cached per layout, query-term set and device)."""
    key = (tuple(channels), tuple(QUERY_TERMS), str(device))
    if key not in _DEFAULT_SCORERS:
        _DEFAULT_SCORERS[key] = Scorer(channels).to(device).eval()
    return _DEFAULT_SCORERS[key]
