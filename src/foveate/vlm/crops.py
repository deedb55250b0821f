"""The crop planner's search parts: what a region costs under a rule (:func:`price_regions`) and how tokens group
into the fewest-token crops (connected components, recursive splits, greedy merges: :func:`_cover`).  The planner
that puts them together, and the two promises it keeps, are :mod:`.plan`."""

from __future__ import annotations

import numpy as np

from .rules.base import VlmRule

#: slack on scale and token comparisons
EPS = 1e-6


def price_regions(rule: VlmRule, boxes: np.ndarray, scales: np.ndarray) -> tuple[np.ndarray, ...]:
    """For source regions ``boxes`` (n, 4) that must be seen at ``scales`` (n,) or finer: the cheapest way to send
    each.  Returns ``(tokens (inf where no option keeps the scale), option index, sent_w, sent_h, seen_w,
    seen_h)``; each picture is sent at its seen size when the provider would shrink it (the same tokens, and the
    shrink is then ours, with area interpolation)."""
    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
    scales = np.asarray(scales, np.float64).reshape(-1)
    bw, bh = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
    fw, fh = rule.fit(bw, bh, scales)
    n = len(bw)
    best = np.full(n, np.inf)
    opt = np.full(n, -1, np.int64)
    vw, vh = fw.copy(), fh.copy()
    for k, name in enumerate(rule.options):
        t, sw, sh = rule.price(fw, fh, name)
        ok = np.maximum(bw / sw, bh / sh) <= scales * (1 + EPS)
        take = ok & (t < best)
        best = np.where(take, t, best)
        opt = np.where(take, k, opt)
        vw, vh = np.where(take, sw, vw), np.where(take, sh, vh)
    shrink = vw * vh < fw * fh
    return best, opt, np.where(shrink, vw, fw), np.where(shrink, vh, fh), vw, vh


# ----------------------------------------------------------------------------------------------------------
# Grouping tokens into crops


def _components(grid: np.ndarray, scales: np.ndarray) -> list[np.ndarray]:
    """Token indices of each 4-connected component of tokens of the same scale (labelled on that level's grid)."""
    from scipy import ndimage

    out = []
    for s in np.unique(scales):
        idx = np.nonzero(scales == s)[0]
        f = max(1, int(round(s)))
        r, c = grid[idx, 0] // f, grid[idx, 1] // f
        mask = np.zeros((int(r.max()) + 1, int(c.max()) + 1), bool)
        mask[r, c] = True
        labels, n = ndimage.label(mask)
        lab = labels[r, c]
        order = np.argsort(lab, kind="stable")
        cuts = np.searchsorted(lab[order], np.arange(2, n + 1))
        out += [idx[part] for part in np.split(order, cuts) if len(part)]
    return out


def _bbox(boxes: np.ndarray) -> np.ndarray:
    return np.array([boxes[:, 0].min(), boxes[:, 1].min(), boxes[:, 2].max(), boxes[:, 3].max()], np.float64)


#: a picture of a plan in the making: its source box and the scale it must keep
Region = tuple[np.ndarray, float]
#: a context candidate: (tokens, scale, size sent, size seen, option)
Context = tuple[int, float, tuple[int, int], tuple[int, int], str | None]


def _partition(
    rule: VlmRule, boxes: np.ndarray, scales: np.ndarray, members: list[np.ndarray], overhead: float
) -> list[Region] | None:
    """Each group of tokens as one picture, or split in two at the median of its tokens' centres along its longer
    side, recursively, where the halves cost less (tokens + ``overhead`` each) or the provider would shrink the
    whole below its scale.  Returns the pictures' ``(bbox, scale)`` or ``None`` when a single token cannot be
    kept.  The split tree is built and priced one depth at a time, vectorised over its nodes."""
    if not members:
        return []
    floor = min(s.tokens for s in rule.sendings(1, 1)) + overhead  # the cheapest picture there is
    cx = (boxes[:, 0] + boxes[:, 2]) / 2
    cy = (boxes[:, 1] + boxes[:, 3]) / 2
    idx = np.concatenate(members)
    starts = np.cumsum([0] + [len(m) for m in members])[:-1]
    parent = np.full(len(members), -1)
    cost_l, bb_l, sc_l, par_l = [], [], [], []
    offset = 0
    while len(starts):
        bb = np.stack(
            [
                np.minimum.reduceat(boxes[idx, 0], starts),
                np.minimum.reduceat(boxes[idx, 1], starts),
                np.maximum.reduceat(boxes[idx, 2], starts),
                np.maximum.reduceat(boxes[idx, 3], starts),
            ],
            -1,
        )
        sc = np.minimum.reduceat(scales[idx], starts)
        cost = price_regions(rule, bb, sc)[0] + overhead
        cost_l.append(cost)
        bb_l.append(bb)
        sc_l.append(sc)
        par_l.append(parent)
        lengths = np.diff(np.append(starts, len(idx)))
        grow = (lengths > 1) & ~(cost <= 2 * floor)  # a picture this cheap cannot be split into cheaper halves
        if not grow.any():
            break
        seg = np.repeat(np.arange(len(starts)), lengths)
        wide = (bb[:, 2] - bb[:, 0]) >= (bb[:, 3] - bb[:, 1])
        key = np.where(wide[seg], cx[idx], cy[idx])
        keep = grow[seg]
        order = np.lexsort((key[keep], seg[keep]))
        idx, seg = idx[keep][order], seg[keep][order]
        lengths = lengths[grow]
        first = np.cumsum(np.append(0, lengths))[:-1]
        half = first + lengths // 2
        starts = np.sort(np.concatenate([first, half]))
        parent = offset + np.repeat(np.nonzero(grow)[0], 2)
        offset += len(cost)
    cost = np.concatenate(cost_l)
    bbs, scs, par = np.concatenate(bb_l), np.concatenate(sc_l), np.concatenate(par_l)
    best = cost.copy()
    split = np.zeros(len(cost), bool)
    child_sum = np.zeros(len(cost))
    has_children = np.zeros(len(cost), bool)
    for k in range(len(cost) - 1, -1, -1):  # children come after their parent: settle them first
        if has_children[k] and child_sum[k] < best[k]:
            best[k], split[k] = child_sum[k], True
        if par[k] >= 0:
            child_sum[par[k]] += best[k]
            has_children[par[k]] = True
    if not np.isfinite(best[par < 0]).all():
        return None
    reached = np.zeros(len(cost), bool)  # every ancestor split: the node is one picture unless split itself
    for k in range(len(cost)):
        reached[k] = par[k] < 0 or (reached[par[k]] and split[par[k]])
    shown = reached & ~split
    return [(bbs[k], float(scs[k])) for k in np.nonzero(shown)[0]]


def _merge(
    rule: VlmRule, groups: list[Region], overhead: float, limit: int | None
) -> tuple[list[Region], float] | None:
    """Greedy merging, in rounds: each round merges the pair that saves the most tokens (+ overhead per picture)
    and every other disjoint pair that still saves, best first, then prices the new pairs (one vectorised call);
    until no merge saves.  Then, while there are more than ``limit`` groups, the cheapest feasible merge.  Returns
    ``(groups, cost)`` or ``None`` when the limit cannot be met."""
    if not groups:
        return [], 0.0
    B = np.array([g[0] for g in groups], np.float64)
    S = np.array([g[1] for g in groups], np.float64)
    cost = price_regions(rule, B, S)[0] + overhead

    Pairs = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]

    def pairs(B: np.ndarray, S: np.ndarray, cost: np.ndarray) -> Pairs:
        n = len(B)
        iu, ju = np.triu_indices(n, 1)
        mb = np.stack(
            [
                np.minimum(B[iu, 0], B[ju, 0]),
                np.minimum(B[iu, 1], B[ju, 1]),
                np.maximum(B[iu, 2], B[ju, 2]),
                np.maximum(B[iu, 3], B[ju, 3]),
            ],
            -1,
        )
        mc = price_regions(rule, mb, np.minimum(S[iu], S[ju]))[0] + overhead
        return iu, ju, mb, mc, cost[iu] + cost[ju] - mc

    def apply(
        B: np.ndarray,
        S: np.ndarray,
        cost: np.ndarray,
        chosen: list[int],
        iu: np.ndarray,
        ju: np.ndarray,
        mb: np.ndarray,
        mc: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        used = np.zeros(len(B), bool)
        newB: list[np.ndarray] = []
        newS: list[float] = []
        newC: list[float] = []
        for k in chosen:
            used[iu[k]] = used[ju[k]] = True
            newB.append(mb[k])
            newS.append(min(S[iu[k]], S[ju[k]]))
            newC.append(mc[k])
        keep = ~used
        return (
            np.concatenate([B[keep], np.array(newB).reshape(-1, 4)]),
            np.concatenate([S[keep], newS]),
            np.concatenate([cost[keep], newC]),
        )

    while len(B) > 1:
        iu, ju, mb, mc, gain = pairs(B, S, cost)
        order = np.argsort(-gain, kind="stable")
        order = order[gain[order] > 0]
        if not len(order):
            break
        taken: set[int] = set()
        chosen: list[int] = []
        for k in order.tolist():
            if iu[k] not in taken and ju[k] not in taken:
                taken.update((iu[k], ju[k]))
                chosen.append(k)
        B, S, cost = apply(B, S, cost, chosen, iu, ju, mb, mc)
    while limit is not None and len(B) > limit:
        iu, ju, mb, mc, gain = pairs(B, S, cost)
        k = int(np.argmax(gain))
        if not np.isfinite(gain[k]):
            return None
        B, S, cost = apply(B, S, cost, [k], iu, ju, mb, mc)
    return [(B[i], float(S[i])) for i in range(len(B))], float(cost.sum())


def _cover(
    rule: VlmRule,
    grid: np.ndarray,
    boxes: np.ndarray,
    scales: np.ndarray,
    rest: np.ndarray,
    overhead: float,
    cap: int | None,
) -> tuple[list[Region], float] | None:
    """Crops for the tokens ``rest``: ``(groups, cost)`` or ``None`` when ``cap`` pictures cannot hold them."""
    if not rest.any():
        return [], 0.0
    if cap is not None and cap < 1:
        return None
    idx = np.nonzero(rest)[0]
    groups = _partition(rule, boxes, scales, [idx[m] for m in _components(grid[rest], scales[rest])], overhead)
    return None if groups is None else _merge(rule, groups, overhead, cap)
