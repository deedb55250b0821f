"""Relevance: the :class:`Scorer` that fuses the texture's channels with the query maps, built from the relevance model
(:class:`foveate.weights.Weights`) for one channel layout.

For every tile at every level the scorer reads the tile's mean-mip and max-mip channels and the query maps
(:func:`foveate.query.terms.query_maps`)::

    score = bias + w . [mean | max] + a . query_maps          (a 1x1 convolution over the texture)
    relevance = exp(score)
    need = floor + max(0, v . [mean | max] + u . query_maps)  (how much a tile gains from a finer level)

The quadtree splits the tile with the highest ``relevance * need * (2**level) ** area_exponent * exp(prior[level])``;
the top-k cascade ranks by ``score``.  The weights come from :class:`~foveate.weights.Weights` (the hand-set constants
of :mod:`foveate.weights.defaults`, or what ``foveate train`` learned); the text term's learned parts and the floor
gate stay in the weights (``scorer.weights.text``, ``scorer.weights.floor``), where the query terms and selection read
them.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, TypeVar, cast

import numpy as np
import torch
from torch import nn

from ..core.texture import CHANNEL_TERMS
from ..core.types import F32, F64
from ..weights.defaults import (
    DEFAULT_NEED,
    DEFAULT_WEIGHTS,
    MAX_LEVELS,
    NEED_FLOOR,
    TEXT_FILL,
    TEXT_HEIGHT,
    TEXT_PAD,
    TEXT_SHARPNESS,
    USER_CHANNEL_WEIGHT,
)
from ..weights.weights import FloorGate, TextTerm, Weights, WeightsSpec, load_weights
from .terms import QUERY_TERMS

__all__ = [
    "CHANNEL_TERMS",
    "DEFAULT_NEED",
    "DEFAULT_WEIGHTS",
    "MAX_LEVELS",
    "NEED_FLOOR",
    "TEXT_FILL",
    "TEXT_HEIGHT",
    "TEXT_PAD",
    "TEXT_SHARPNESS",
    "USER_CHANNEL_WEIGHT",
    "Memo",
    "Scorer",
    "default_scorer",
    "handset_scorer",
    "resolve_scorer",
]

T = TypeVar("T")
#: a texture's memo (:meth:`foveate.core.texture.Texture.derived`): ``memo(key, build)`` -> the kept or built value
Memo = Callable[[Hashable, Callable[[], Any]], Any]


class Scorer(nn.Module):
    """Per-channel weights over [mean | max] (a 1x1 convolution) + query-term weights -> score and need.

    Args:
        channels: the texture's channel names (weights are looked up by name, so any preset works).
        weights: the relevance model (default: the hand-set one).  A channel it does not weigh keeps its hand-set
            weight (:data:`~foveate.weights.defaults.DEFAULT_WEIGHTS`), a caller channel ``user:<name>``
            :data:`~foveate.weights.defaults.USER_CHANNEL_WEIGHT`, a query term it does not name the term's own.

    The 0.2 keyword form (``Scorer(channels, weights={...}, need={...}, bias=...)``) still works until 0.4, with a
    warning: the keywords become a :class:`Weights` in which channels not given weigh 0.
    """

    def __init__(
        self, channels: Sequence[str], weights: Weights | Mapping[str, tuple[float, float]] | None = None, **legacy: Any
    ) -> None:
        super().__init__()
        if legacy or (weights is not None and not isinstance(weights, Weights)):  # the 0.2 keyword form
            warnings.warn(
                "Scorer(channels, weights={...}, need=..., ...) is deprecated: pass a foveate.weights.Weights "
                "(Weights.handset().replace(...)); the keyword form goes away in foveate 0.4",
                DeprecationWarning,
                stacklevel=2,
            )
            weights = _legacy_weights(cast(Mapping[str, tuple[float, float]] | None, weights), **legacy)
        model = Weights.handset() if weights is None else weights
        self.weights = model
        self.channels = tuple(channels)
        channel = {**{k: v for k, v in DEFAULT_WEIGHTS.items() if k not in model.channel}, **model.channel}
        c = len(self.channels)
        w = torch.zeros(2 * c)
        v = torch.zeros(2 * c)
        for i, name in enumerate(self.channels):
            wm, wx = channel.get(name, USER_CHANNEL_WEIGHT if name.startswith("user:") else (0.0, 0.0))
            w[i], w[c + i] = wm, wx
            v[i], v[c + i] = model.need.get(name, (0.0, 0.0))
        self.weight = nn.Parameter(w)
        self.need_weight = nn.Parameter(v)
        self.bias = nn.Parameter(torch.tensor(float(model.bias)))
        qw = {name: t.weight for name, t in QUERY_TERMS.items()}
        qw.update(model.query)
        self.query_names = tuple(qw)
        self.query_weight = nn.Parameter(torch.tensor([qw[n] for n in self.query_names], dtype=torch.float32))
        qn = {name: t.need_weight for name, t in QUERY_TERMS.items()}
        qn.update(model.query_need)
        self.query_need = nn.Parameter(torch.tensor([qn.get(n, 0.0) for n in self.query_names], dtype=torch.float32))
        self.need_floor = float(model.need_floor)
        prior = torch.zeros(MAX_LEVELS)
        if model.level_prior:
            vals = torch.as_tensor(list(model.level_prior), dtype=torch.float32)[:MAX_LEVELS]
            prior[: len(vals)] = vals
        self.level_prior = nn.Parameter(prior)

    @classmethod
    def from_weights(cls, weights: Weights, channels: Sequence[str], device: torch.device | str = "cpu") -> Scorer:
        """The scorer of ``weights`` for this channel layout, on ``device`` in eval mode (kept in ``weights.scorers``
        per layout, query-term set and device: built once)."""
        key = (tuple(channels), tuple(QUERY_TERMS), str(device))
        scorer = weights.scorers.get(key)
        if scorer is None:
            scorer = weights.scorers[key] = cls(channels, weights).to(torch.device(device)).eval()
        return scorer

    @property
    def text(self) -> TextTerm:
        """The text term's learned parts (``weights.text``)."""
        return self.weights.text

    @property
    def floor(self) -> FloorGate | None:
        """The uniform-floor gate (``weights.floor``)."""
        return self.weights.floor

    def prior(self, num_levels: int) -> F64:
        """(num_levels,) float64: the per-level prior added to the quadtree's log-priority."""
        out: F64 = self.level_prior.detach().double().cpu().numpy()[:num_levels]
        return out

    def _query_index(self, qnames: Sequence[str], device: torch.device) -> torch.Tensor:
        return torch.tensor([self.query_names.index(n) for n in qnames], device=device)

    def forward(
        self, feats: torch.Tensor, qmaps: torch.Tensor | None = None, qnames: Sequence[str] = ()
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Args:
            feats: (N, 2C) [mean | max] features.  qmaps: (N, Q) query maps named ``qnames``.
        Returns:
            ``(score, need)``, each (N,).
        """
        score = feats @ self.weight.to(feats) + self.bias.to(feats)
        need = feats @ self.need_weight.to(feats)
        if qmaps is not None and len(qnames):
            idx = self._query_index(qnames, feats.device)
            score = score + qmaps @ self.query_weight.to(feats)[idx]
            need = need + qmaps @ self.query_need.to(feats)[idx]
        need = self.need_floor + torch.clamp(need, min=0.0)
        return score, need

    def bound(self, feats: torch.Tensor, qmaps: torch.Tensor | None = None, qnames: Sequence[str] = ()) -> torch.Tensor:
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
            est = est + qmaps @ self.query_weight.to(feats)[self._query_index(qnames, feats.device)]
        return est

    def evaluate(
        self,
        feats: torch.Tensor,
        qmaps: torch.Tensor | None = None,
        qnames: Sequence[str] = (),
        memo: Memo | None = None,
    ) -> tuple[F32, F32, F32]:
        """Inference for ``select``: ``(score, need, bound)`` as (N,) float32 NumPy arrays.

        Same numbers as :meth:`forward` and :meth:`bound`.  On the CPU this is a single-threaded NumPy product:
        for a product this small, torch's intra-op threads cost 10x (2 ms -> 20+ ms) on a busy 2-core machine.
        The channels' part does not depend on the query: given the texture's ``memo`` (``texture.derived``), whose
        flat features ``feats`` are, it is kept there for the next query, per weights (compared by value).
        """
        if feats.device.type != "cpu":
            with torch.inference_mode():
                score_t, need_t = self(feats, qmaps, qnames)
                bound_t = self.bound(feats, qmaps, qnames)
            s, n, b = (t.float().cpu().numpy() for t in (score_t, need_t, bound_t))
            return s, n, b
        c = len(self.channels)
        w = self.weight.detach().float().numpy()
        w0 = w[:c] + w[c:]
        mat = np.stack(
            [w, self.need_weight.detach().float().numpy(), np.concatenate([np.minimum(w0, 0.0), np.maximum(w0, 0.0)])],
            axis=1,
        )

        def product() -> tuple[torch.Tensor, F32]:
            return feats, np.einsum("ij,jk->ik", feats.numpy(), mat)  # einsum: no BLAS threads

        kept_feats, prod = product() if memo is None else memo((CHANNEL_TERMS, mat.tobytes()), product)
        if kept_feats is not feats:  # features other than the ones the memo's texture holds: not kept
            prod = product()[1]
        bias = float(self.bias.detach())
        q: F32 | float = 0.0
        qn: F32 | float = 0.0
        if qmaps is not None and len(qnames):
            idx = [self.query_names.index(n) for n in qnames]
            a = self.query_weight.detach().float().numpy()[idx]
            q = np.einsum("ij,j->i", qmaps.numpy(), a)
            qn = np.einsum("ij,j->i", qmaps.numpy(), self.query_need.detach().float().numpy()[idx])
        score = (prod[:, 0] + bias + q).astype(np.float32)
        need = (self.need_floor + np.maximum(prod[:, 1] + qn, 0.0)).astype(np.float32)
        bound = (prod[:, 2] + bias + q).astype(np.float32)
        return score, need, bound

    def explain(
        self, feats: torch.Tensor, qmaps: torch.Tensor | None, qnames: Sequence[str], rows: torch.Tensor
    ) -> dict[str, float]:
        """Mean contribution of each channel and query term to the scores of ``rows`` (for ``--explain``)."""
        c = len(self.channels)
        f = feats[rows]
        contrib = (f * self.weight.to(f)).reshape(len(rows), 2, c).sum(1).mean(0)
        out = {name: float(contrib[i]) for i, name in enumerate(self.channels) if float(contrib[i]) != 0.0}
        if qmaps is not None:
            for j, n in enumerate(qnames):
                out[f"query:{n}"] = float((qmaps[rows, j] * self.query_weight[self.query_names.index(n)]).mean())
        return dict(sorted(out.items(), key=lambda kv: -abs(kv[1])))


def _legacy_weights(
    weights: Mapping[str, tuple[float, float]] | None = None,
    need: Mapping[str, float] | None = None,
    query_weights: Mapping[str, float] | None = None,
    bias: float = 0.0,
    need_floor: float = NEED_FLOOR,
    query_need: Mapping[str, float] | None = None,
    need_mean: Mapping[str, float] | None = None,
    level_prior: Sequence[float] | None = None,
    text_ranker: Any = None,
    text_sharpness: float = TEXT_SHARPNESS,
    text_pad: float = TEXT_PAD,
    text_fill: float = TEXT_FILL,
    floor: Mapping[str, float] | None = None,
    text_height: float = TEXT_HEIGHT,
    text_extent: Any = None,
) -> Weights:
    """The 0.2 keyword form of :class:`Scorer` as :class:`Weights` (channels not given weigh 0, as they did)."""
    channel = {k: (0.0, 0.0) for k in DEFAULT_WEIGHTS}
    channel.update(
        {k: (float(v[0]), float(v[1])) for k, v in (DEFAULT_WEIGHTS if weights is None else weights).items()}
    )
    need_max = DEFAULT_NEED if need is None else need
    names = set(need_max) | set(need_mean or {})
    return Weights(
        "custom",
        channel,
        {k: (float((need_mean or {}).get(k, 0.0)), float(need_max.get(k, 0.0))) for k in names},
        dict(query_weights or {}),
        dict(query_need or {}),
        float(bias),
        float(need_floor),
        tuple(level_prior or ()),
        TextTerm(text_ranker, text_extent, text_sharpness, text_pad, text_fill, text_height),
        FloorGate(dict(floor)) if floor is not None else None,
    )


def handset_scorer(channels: Sequence[str], device: torch.device | str = "cpu") -> Scorer:
    """The hand-set scorer for a channel layout (built once per layout, query-term set and device)."""
    return Scorer.from_weights(load_weights("handset"), channels, device)


def default_scorer(channels: Sequence[str], device: torch.device | str = "cpu") -> Scorer:
    """The scorer ``select`` uses when given none: the package's default weights (the trained ones it ships, else
    the hand-set ones) for this channel layout."""
    return Scorer.from_weights(load_weights(None), channels, device)


def resolve_scorer(
    weights: WeightsSpec, scorer: Scorer | None, channels: Sequence[str], device: torch.device | str
) -> Scorer:
    """The scorer ``select`` uses: an explicit ``scorer`` wins, else one built from ``weights`` (default: the
    package's default weights)."""
    if scorer is not None:
        return scorer
    return Scorer.from_weights(load_weights(weights), channels, device)
