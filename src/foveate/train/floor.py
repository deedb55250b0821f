"""Fit the uniform-floor gate (:mod:`foveate.selection.floor`) on the training split.

For every (question, budget) of the training pages we know the hit and legible coverage of the learned foveated
selection and of the uniform layout.  The gate should foveate where that wins: a weighted logistic regression on
the gate's features, the label "foveated wins", the weight the difference (hit counts fully, legible coverage by
``legible``).  Ties (the same hit, and the same coverage as far as ``legible`` counts it) are labelled "uniform"
with weight ``tie``: where foveating gains nothing the uniform layout is the safe answer (on held-out photos a
gate that ignored ties foveated on a few tie-like questions and lost some).  Every set weighs the same in total
(a set where the uniform layout tends to win, photos, is not outvoted by the many document questions where
foveating wins).  Decision at margin 0.

``legible``, ``tie`` and a margin are chosen together by :func:`choose_gate` from :data:`GATE_GRID` x
:data:`MARGIN_GRID` by k-fold cross-validation over the training images (never the validation split): every
training record is scored by the gate fitted without its fold, and the bias is lowered by the margin at which the
held-out gated selection falls below the uniform layout on the fewest questions (per set and budget), then has the
highest mean hit, so that a selection not expected to beat the uniform layout *with margin* falls back to it.  The
three are chosen together, not the tie at margin 0 and then a margin for it: a tie that loses a question more at
margin 0 can lose none at a small margin and keep far more hits than the other tie needs a larger margin to keep
(a run trained without FUNSD: tie 0.5 and margin 0.5 fell back on 40 % of receipts at 273 tokens, where tie 0.25
and margin 0.5 lost no more held-out questions).
"""

from __future__ import annotations

import hashlib
from collections import defaultdict

import numpy as np
import torch

from ..selection.floor import FLOOR_FEATURES, floor_margin

#: (legible, tie) pairs :func:`choose_gate` compares.  Legible coverage does not count (the floor's promise is
#: about hits: a gate that also chased coverage foveated on photos where it gained coverage and lost hits), and a tie
#: weighs at least a quarter of a hit (with less, or with coverage counted, the gate of a run trained without
#: WildReceipt left the held-out photos one or two questions below the uniform layout, while cross-validation on its
#: training images showed no loss: the held-out check is too coarse to choose among weaker settings)
GATE_GRID = ((0.0, 0.25), (0.0, 0.5))

#: margins the calibration compares (subtracted from the bias: foveate only where ``w . f >= margin``)
MARGIN_GRID = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)


def gate_data(
    recs: list[dict], method: str, legible: float = 0.0, tie: float = 0.25
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(X (R, F), label (R,), weight (R,)) from records with ``features`` (see ``evaluate.records``)."""
    xs, ys, ws, sets = [], [], [], []
    for r in recs:
        f_hit, f_leg, _ = r["methods"][method]
        u_hit, u_leg, _ = r["methods"]["uniform"]
        gain = (float(f_hit) - float(u_hit)) + legible * (f_leg - u_leg)
        if abs(gain) < 1e-6:
            if not tie:
                continue
            label, weight = 0.0, tie
        else:
            label, weight = (1.0 if gain > 0 else 0.0), abs(gain)
        xs.append([r["features"].get(k, 0.0) for k in FLOOR_FEATURES])
        ys.append(label)
        ws.append(weight)
        sets.append(r["set"])
    w = np.array(ws, np.float32)
    names = sorted(set(sets))
    for name in names:  # each set's pairs weigh 1 / (number of sets) in total
        pick = np.array([s == name for s in sets])
        w[pick] *= len(w) / (len(names) * w[pick].sum())
    return np.array(xs, np.float32).reshape(-1, len(FLOOR_FEATURES)), np.array(ys, np.float32), w


def fit_gate(x: np.ndarray, y: np.ndarray, w: np.ndarray, l2: float = 1e-4) -> dict[str, float]:
    """Weighted logistic regression (L-BFGS; L2 on all but the bias).  Returns weights by feature name."""
    if len(x) == 0:
        return {k: (1.0 if k == "bias" else 0.0) for k in FLOOR_FEATURES}  # no evidence: always foveate
    xt, yt, wt = torch.from_numpy(x), torch.from_numpy(y), torch.from_numpy(w)
    theta = torch.zeros(x.shape[1], requires_grad=True)
    reg = torch.tensor([0.0 if k == "bias" else 1.0 for k in FLOOR_FEATURES])
    opt = torch.optim.LBFGS([theta], lr=1.0, max_iter=200, line_search_fn="strong_wolfe")
    total = float(wt.sum())

    def closure():
        opt.zero_grad()
        loss = (wt * torch.nn.functional.binary_cross_entropy_with_logits(xt @ theta, yt, reduction="none")).sum()
        loss = loss / total + l2 * (reg * theta * theta).sum()
        loss.backward()
        return loss

    opt.step(closure)
    return {k: round(float(v), 6) for k, v in zip(FLOOR_FEATURES, theta.detach().tolist())}


def gate_accuracy(weights: dict[str, float], x: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    """Weighted share of differing (question, budget) pairs the gate decides right."""
    if not len(x):
        return float("nan")
    pred = x @ np.array([weights[k] for k in FLOOR_FEATURES]) >= 0
    return float((w * (pred == (y > 0.5))).sum() / w.sum())


def gated_hits(
    weights: dict[str, float], recs: list[dict], method: str, margins: list[float] | None = None, offset: float = 0.0
) -> dict[tuple[str, int], list[int]]:
    """Per (set, budget): [questions hit by the gated selection, by the uniform layout, questions].  ``margins``:
    the gate's margin per record (default: ``weights``' margin); the selection foveates where it is ``>= offset``."""
    out: dict[tuple[str, int], list[int]] = defaultdict(lambda: [0, 0, 0])
    for i, r in enumerate(recs):
        margin = floor_margin(weights, r["features"]) if margins is None else margins[i]
        u_hit = int(r["methods"]["uniform"][0])
        cell = out[(r["set"], r["budget"])]
        cell[0] += int(r["methods"][method][0]) if margin >= offset else u_hit
        cell[1] += u_hit
        cell[2] += 1
    return out


def _below_and_mean(cells: dict[tuple[str, int], list[int]]) -> tuple[int, float]:
    """(questions below the uniform layout, summed over (set, budget) cells; mean hit % over the cells)."""
    below = sum(max(0, u - g) for g, u, _ in cells.values())
    mean = float(np.mean([100.0 * g / n for g, _, n in cells.values()])) if cells else 0.0
    return below, round(mean, 3)


def held_out_margins(recs: list[dict], method: str, legible: float, tie: float, which: list[int]) -> list[float]:
    """Each record's margin under the gate (``legible``, ``tie``) fitted without its fold (``which``: each record's
    fold)."""
    margins = [0.0] * len(recs)
    for k in sorted(set(which)):
        fitted = fit_gate(*gate_data([r for r, f in zip(recs, which) if f != k], method, legible, tie))
        for i, f in enumerate(which):
            if f == k:
                margins[i] = floor_margin(fitted, recs[i]["features"])
    return margins


def margin_scores(recs: list[dict], held_out: list[float], method: str) -> list[dict]:
    """For each margin of :data:`MARGIN_GRID`: the questions by which the gated selection, each record judged by the
    gate fitted without its fold (``held_out``: those cross-fitted margins), is below the uniform layout (per set and
    budget) and its mean hit."""
    scores = []
    for offset in MARGIN_GRID:
        below, mean = _below_and_mean(gated_hits({}, recs, method, held_out, offset))
        scores.append({"margin": offset, "below_uniform": below, "mean_hit": mean})
    return scores


def safest_setting(scores: list[dict]) -> dict:
    """Fewest questions below the uniform layout, then the highest mean hit, then the smallest margin."""
    return min(scores, key=lambda s: (s["below_uniform"], -s["mean_hit"], s["margin"]))


def choose_gate(recs: list[dict], method: str, folds: int = 4, seed: int = 0) -> tuple[dict[str, float], dict]:
    """Fit the gate with the (legible, tie) of :data:`GATE_GRID` and the margin of :data:`MARGIN_GRID` that do best
    together in ``folds``-fold cross-validation over the images of ``recs`` (the training split): fewest held-out
    questions below the uniform layout (summed over set x budget), then the highest mean held-out hit, then the
    smallest margin.  Returns (weights fitted on all of ``recs``, the margin folded into the bias; report)."""

    def fold(r: dict) -> int:
        return int(hashlib.sha256(f"{seed}:{r['set']}:{r['image']}".encode()).hexdigest(), 16) % folds

    which = [fold(r) for r in recs]
    grid = []
    for legible, tie in GATE_GRID:
        margins = held_out_margins(recs, method, legible, tie, which)
        grid += [{"legible": legible, "tie": tie, **s} for s in margin_scores(recs, margins, method)]
    best = safest_setting(grid)
    x, y, w = gate_data(recs, method, best["legible"], best["tie"])
    weights = fit_gate(x, y, w)
    weights["bias"] = round(weights["bias"] - best["margin"], 6)  # foveate only where w . f >= margin
    report = {
        "folds": folds,
        "grid": grid,
        "chosen": {"legible": best["legible"], "tie": best["tie"], "margin": best["margin"]},
        "train_pairs": int(len(x)),
        "train_accuracy": round(gate_accuracy(weights, x, y, w), 4),
    }
    return weights, report
