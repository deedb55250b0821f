"""Relevance: the :class:`Scorer` that fuses the texture's channels with the query maps.

For every tile at every level the scorer reads the tile's mean-mip and max-mip channels and the query maps
(:func:`foveate.query.terms.query_maps`)::

    score = bias + w . [mean | max] + a . query_maps          (a 1x1 convolution over the texture)
    relevance = exp(score)
    need = floor + max(0, v . [mean | max] + u . query_maps)  (how much a tile gains from a finer level)

The quadtree splits the tile with the highest ``relevance * need * (2**level) ** area_exponent * exp(prior[level])``;
the top-k cascade ranks by ``score``.  The hand-set weights (``DEFAULT_WEIGHTS``, ``DEFAULT_NEED``, the query terms'
own weights, no level prior) are documented below; ``foveate train`` learns all of them from annotated data
(:mod:`foveate.train`) and writes a weights file (:mod:`foveate.weights`) that builds a scorer for any channel
layout.  A learned scorer also carries the ``text`` term's answer ranker and the uniform-floor gate
(:mod:`foveate.selection.floor`).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import torch
from torch import nn

from ..core.texture import CHANNEL_TERMS
from .terms import QUERY_TERMS

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

#: Levels a level prior can hold (EncodeConfig.max_levels is at most 10).
MAX_LEVELS = 10
#: The learned text term paints a line with value 1 + log(p) / TEXT_SHARPNESS (clipped to [0, 1]), p the
#: ranker's probability, grown by TEXT_PAD line heights: with query weight a, relevance ~ p ** (a / 10).  A tile
#: the grown box covers a fraction f of gets that value times 1 - TEXT_FILL (1 - f): with TEXT_FILL 0 every tile
#: it touches gets the full value (weights files that do not name a fill).
TEXT_SHARPNESS, TEXT_PAD, TEXT_FILL = 10.0, 0.25, 0.0
#: The height of the print an OCR line box holds, as a share of the box's height (the boxes hug ascenders, descenders
#: and a margin): the ``auto`` mode's legibility estimate.  ``foveate train`` measures it on its training pages
#: (annotated text heights against the OCR boxes of the answer lines); this is the value for files without one.
TEXT_HEIGHT = 0.7

#: channel -> weight on the max-mip for the need for detail
DEFAULT_NEED: dict[str, float] = {
    "edges_dark": 0.5, "edges_light": 0.5, "highpass": 1.0, "lowpass": 0.5, "text": 1.0, "boundaries": 0.3,
    "text_density": 2.0,  # small print must reach level 0 to stay legible
}
NEED_FLOOR = 0.05


class Scorer(nn.Module):
    """Per-channel weights over [mean | max] (a 1x1 convolution) + query-term weights -> score and need.

    Args:
        channels: the texture's channel names (weights are looked up by name, so any preset works).
        weights: channel -> (mean weight, max weight); defaults to ``DEFAULT_WEIGHTS``.
        need: channel -> max-mip weight for the need for detail; defaults to ``DEFAULT_NEED``.
        query_weights: query term -> weight; defaults to each registered term's weight.
        query_need: query term -> weight in the need for detail; defaults to each term's ``need_weight``.
        bias: constant added to every score.
        level_prior: per pyramid level, added to the quadtree's log-priority of splitting a tile of that level
            (``None``: zeros, the hand-set behaviour).
        text_ranker: the learned answer ranker the ``text`` query term uses (``None``: the hand-set matching).
        text_extent: the learned model of which neighbours of a likely line continue its answer
            (``foveate.query.text.extent``; ``None``: the lines alone are painted).
        text_sharpness, text_pad, text_fill: how the ranker's line probabilities are painted (see
            ``foveate.query.text.term``).
        text_height: the print's height per OCR box height (:data:`TEXT_HEIGHT`; ``foveate.selection.auto``).
        floor: the uniform-floor gate's weights by feature name (``None``: no floor).
    """

    def __init__(self, channels: Sequence[str], weights: Mapping[str, tuple[float, float]] | None = None,
                 need: Mapping[str, float] | None = None, query_weights: Mapping[str, float] | None = None,
                 bias: float = 0.0, need_floor: float = NEED_FLOOR,
                 query_need: Mapping[str, float] | None = None, need_mean: Mapping[str, float] | None = None,
                 level_prior: Sequence[float] | None = None, text_ranker: nn.Module | None = None,
                 text_sharpness: float = TEXT_SHARPNESS, text_pad: float = TEXT_PAD, text_fill: float = TEXT_FILL,
                 floor: Mapping[str, float] | None = None, text_height: float = TEXT_HEIGHT,
                 text_extent: nn.Module | None = None) -> None:
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
            v[i] = (need_mean or {}).get(name, 0.0)
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
        prior = torch.zeros(MAX_LEVELS)
        if level_prior is not None:
            vals = torch.as_tensor(list(level_prior), dtype=torch.float32)[:MAX_LEVELS]
            prior[: len(vals)] = vals
        self.level_prior = nn.Parameter(prior)
        self.text_ranker, self.text_extent = text_ranker, text_extent
        self.text_sharpness, self.text_pad, self.text_fill = float(text_sharpness), float(text_pad), float(text_fill)
        self.text_height = float(text_height)
        self.floor = dict(floor) if floor is not None else None

    def prior(self, num_levels: int) -> np.ndarray:
        """(num_levels,) float64: the per-level prior added to the quadtree's log-priority."""
        return self.level_prior.detach().double().cpu().numpy()[:num_levels]

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
                 qnames: Sequence[str] = (), cache: dict | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Inference for ``select``: ``(score, need, bound)`` as (N,) float32 NumPy arrays.

        Same numbers as :meth:`forward` and :meth:`bound`.  On the CPU this is a single-threaded NumPy product:
        for a product this small, torch's intra-op threads cost 10x (2 ms -> 20+ ms) on a busy 2-core machine.
        The channels' part does not depend on the query: given a ``cache`` (the texture's), it is kept there for
        the next query, for these ``feats`` (the same tensor object) and these weights (compared by value).
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
        kept = cache.get(CHANNEL_TERMS) if cache is not None else None
        if kept is not None and kept[0] is feats and np.array_equal(kept[1], mat):
            prod = kept[2]
        else:
            prod = np.einsum("ij,jk->ik", feats.numpy(), mat)  # einsum: no BLAS threads
            if cache is not None:
                cache[CHANNEL_TERMS] = (feats, mat, prod)
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


def handset_scorer(channels: Sequence[str], device: torch.device) -> Scorer:
    """The hand-set scorer for a channel layout (cached per layout, query-term set and device)."""
    key = (tuple(channels), tuple(QUERY_TERMS), str(device))
    if key not in _DEFAULT_SCORERS:
        _DEFAULT_SCORERS[key] = Scorer(channels).to(device).eval()
    return _DEFAULT_SCORERS[key]


def default_scorer(channels: Sequence[str], device: torch.device) -> Scorer:
    """The scorer ``select`` uses when given none: the package's default weights (``foveate.weights``; the
    trained ones it ships, else the hand-set ones) for this channel layout."""
    from ..weights import load_weights

    return load_weights(None).scorer(channels, device)
