"""Fit the uniform-floor gate (:mod:`foveate.selection.floor`) on the training split.

For every (question, budget) of the training pages we know the legible coverage of the learned foveated selection
and of the uniform layout.  Where they differ, the gate should pick the better one: a weighted logistic regression
on the gate's features, the label "foveated wins", the weight the difference (hit counts fully, legible coverage
in part).  Decision at margin 0.  Ties (both hit or both miss) carry no preference and are left out.  Every set
weighs the same in total (a set where the uniform layout tends to win, photos, is not outvoted by the many
document questions where foveating wins).
"""

from __future__ import annotations

import numpy as np
import torch

from ..selection.floor import FLOOR_FEATURES


def gate_data(recs: list[dict], method: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(X (R, F), label (R,), weight (R,)) from records with ``features`` (see ``evaluate.records``)."""
    xs, ys, ws, sets = [], [], [], []
    for r in recs:
        f_hit, f_leg, _ = r["methods"][method]
        u_hit, u_leg, _ = r["methods"]["uniform"]
        gain = (float(f_hit) - float(u_hit)) + 0.25 * (f_leg - u_leg)
        if abs(gain) < 1e-6:
            continue
        xs.append([r["features"][k] for k in FLOOR_FEATURES])
        ys.append(1.0 if gain > 0 else 0.0)
        ws.append(abs(gain))
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
