"""Fit the scorer's channel weights, query-term weights and per-level prior from per-tile targets.

The target is the oracle's own split priority (:func:`foveate.eval.oracle.oracle_tiles`): for a tile of level l, the
area of the question's ground-truth boxes inside it that are not yet legible at level l (their text height / 2**l
is under 8 px).  The quadtree that splits by this priority is the oracle; a scorer that predicts it from the
texture and the query maps alone imitates the oracle where the ground truth is not known.  The model is
log-linear, exactly the scorer's form::

    log E[blurry area / tile area] = w . [mean | max] + a . query_maps + b[level]

fitted by Poisson regression (the target is a non-negative area share; zero for most tiles), on every tile that
holds such area and a seeded sample of the others (reweighted).  The scorer's log-priority is then
``score + prior[l]`` with ``prior[l] = b[l] + l ln 2`` (the tile's area, 4**l, less the ``(2**l) **
area_exponent`` the quadtree already adds at area_exponent 1); the need for detail is folded into the score.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ..eval.metrics import DEFAULT_MIN_PX, legible_level
from ..eval.oracle import _tile_overlap
from ..query.query import Query
from ..query.terms import QUERY_TERMS, query_maps
from ..weights.weights import Weights
from .data import Page


@dataclass
class TileData:
    """Rows of the Poisson regression: features (R, F), targets (R,), weights (R,), and the column names."""

    x: np.ndarray
    y: np.ndarray
    w: np.ndarray
    columns: list[str]


def blurry_share(texture, boxes: np.ndarray, heights: np.ndarray | None, min_px: float = DEFAULT_MIN_PX) -> np.ndarray:
    """Per tile of every level, flattened like ``texture.flat_features()``: the share of the tile covered by
    ground-truth boxes not yet legible at that level.  (N_total,) float64."""
    h = boxes[:, 3] - boxes[:, 1] if heights is None else heights
    lmax = np.array([legible_level(float(v), min_px) for v in h], np.int64)
    out = []
    p = texture.patch_size
    for lvl, shape in enumerate(texture.level_shapes):
        side = p << lvl
        blurry = boxes[(lmax >= 0) & (lmax < lvl)]
        out.append((_tile_overlap(shape, side, blurry) / float(side * side)).ravel())
    return np.concatenate(out)


def tile_rows(
    pages: list[Page], weights: dict[int, Weights], terms: list[str], seed: int = 0, negatives: int = 64
) -> TileData:
    """The regression rows of every question of ``pages``.  ``weights[i]`` are the weights whose query terms (their
    answer ranker) paint page i's query maps -- for honest maps, ones whose ranker did not train on that page."""
    rng = np.random.default_rng(seed)
    xs, ys, ws = [], [], []
    channels = None
    for i, page in enumerate(pages):
        tex = page.texture
        flat_features, offsets = tex.flat_features()
        feats = flat_features.float().numpy()
        channels = channels or list(tex.channels)
        if list(tex.channels) != channels:
            raise ValueError("training textures must share one channel layout (one preset)")
        level = np.concatenate([np.full(offsets[j + 1] - offsets[j], j) for j in range(len(offsets) - 1)])
        for s in page.samples:
            qm = query_maps(tex, Query.coerce(s.query), weights[i])
            q = np.zeros((len(feats), len(terms)), np.float32)
            flat = qm.flat(tex, torch.device("cpu"))
            if flat is not None:  # None: no map (and no name)
                for j, name in enumerate(qm.names):
                    q[:, terms.index(name)] = flat[:, j].numpy()
            y = blurry_share(tex, s.boxes, s.heights)
            pos = np.nonzero(y > 0)[0]
            neg = np.nonzero(y == 0)[0]
            take = rng.choice(neg, size=min(negatives, len(neg)), replace=False) if len(neg) else neg
            idx = np.concatenate([pos, take])
            w = np.concatenate([np.ones(len(pos)), np.full(len(take), len(neg) / max(len(take), 1))])
            onehot = np.zeros((len(idx), 10), np.float32)
            onehot[np.arange(len(idx)), level[idx]] = 1.0
            xs.append(np.concatenate([feats[idx], q[idx], onehot], 1))
            ys.append(y[idx])
            ws.append(w / max(w.sum(), 1.0) * 100.0)  # every question weighs the same
    c = channels or []
    cols = (
        [f"mean:{n}" for n in c]
        + [f"max:{n}" for n in c]
        + [f"query:{t}" for t in terms]
        + [f"level:{lvl}" for lvl in range(10)]
    )
    return TileData(
        np.concatenate(xs).astype(np.float32),
        np.concatenate(ys).astype(np.float32),
        np.concatenate(ws).astype(np.float32),
        cols,
    )


def fit_poisson(data: TileData, l2: float = 1e-4, rounds: int = 3) -> np.ndarray:
    """Weighted Poisson regression with a log link (L-BFGS on standardised features; L2 on all but the level
    columns).  Returns (F,) weights on the raw features, the intercept folded into the level columns."""
    x, y, w = (torch.from_numpy(a) for a in (data.x, data.y, data.w))
    level = torch.tensor([c.startswith("level:") for c in data.columns])
    mu, sd = x.mean(0), x.std(0) + 1e-6
    mu[level], sd[level] = 0.0, 1.0
    xs = (x - mu) / sd
    theta = torch.zeros(x.shape[1], requires_grad=True)
    reg = (~level).float()
    opt = torch.optim.LBFGS(
        [theta], lr=1.0, max_iter=500, line_search_fn="strong_wolfe", tolerance_grad=1e-9, tolerance_change=1e-12
    )
    total = float(w.sum())

    def closure():
        opt.zero_grad()
        eta = (xs @ theta).clamp(max=30.0)
        loss = (w * (torch.exp(eta) - y * eta)).sum() / total + l2 * (reg * theta * theta).sum()
        loss.backward()
        return loss

    for _ in range(rounds):
        opt.step(closure)
    th = theta.detach() / sd
    th[level] -= (theta.detach() * mu / sd).sum()  # the intercept of the standardisation, on every level
    return th.numpy().astype(np.float64)


def scorer_fields(theta: np.ndarray, columns: list[str]) -> dict:
    """The fitted vector as Weights fields: channel and query weights, zero need, the level prior."""
    val = dict(zip(columns, theta.tolist()))
    channels = sorted({c.split(":", 1)[1] for c in columns if c.startswith(("mean:", "max:"))})
    channel = {n: (val[f"mean:{n}"], val[f"max:{n}"]) for n in channels}
    query = {c.split(":", 1)[1]: v for c, v in val.items() if c.startswith("query:")}
    prior = tuple(val[f"level:{lvl}"] + lvl * math.log(2.0) for lvl in range(10))
    return {
        "channel": channel,
        "need": {n: (0.0, 0.0) for n in channels},
        "query": query,
        "query_need": {t: 0.0 for t in QUERY_TERMS},
        "bias": 0.0,
        "need_floor": 1.0,
        "level_prior": prior,
    }
