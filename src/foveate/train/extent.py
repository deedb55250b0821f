"""Fit the answer-extent model (:class:`foveate.query.text.extent.AnswerExtent`) on the training pages.

Every answer box of a text question gives examples: for each OCR line that holds part of the box
(:func:`.ranker.answer_lines`) and each of that line's layout neighbours
(:func:`~foveate.query.text.extent.candidate_pairs`), the pair's features and whether the neighbour holds part of the
*same* box.  A logistic regression on standardised features, L2-penalised, fitted by L-BFGS from zeros:
deterministic, a few seconds.
"""

from __future__ import annotations

import numpy as np
import torch

from ..query.text.extent import COLUMNS, AnswerExtent, page_pairs, pair_features
from ..query.text.features import line_contents
from ..query.text.layout import text_index
from ..query.text.match import question_scores
from .data import Page
from .ranker import answer_lines

#: L2 penalty on the standardised weights
L2 = 1e-3


def extent_examples(pages: list[Page]) -> tuple[np.ndarray, np.ndarray]:
    """(rows (P, F) float32, labels (P,) float32) over the text questions of ``pages``."""
    rows, labels = [], []
    for page in pages:
        index = text_index(page.texture)
        if index is None or not index.lines:
            continue
        pairs = page_pairs(index)
        if not len(pairs):
            continue
        content = line_contents(index)
        for s in page.samples:
            if s.text is None or s.points:
                continue
            lex, cos = question_scores(index, s.text)
            for box in np.asarray(s.boxes, np.float64).reshape(-1, 4):
                inside = answer_lines(index.boxes, box[None])
                use = inside[pairs[:, 0]]
                if use.any():
                    rows.append(pair_features(index.boxes, content, pairs[use], lex, cos))
                    labels.append(inside[pairs[use, 1]].astype(np.float32))
    if not rows:
        return np.zeros((0, len(COLUMNS)), np.float32), np.zeros(0, np.float32)
    return np.concatenate(rows), np.concatenate(labels)


def fit_extent(pages: list[Page], l2: float = L2) -> tuple[AnswerExtent | None, dict]:
    """The extent model fitted on ``pages`` (``None`` when they give no pair with both labels).  Returns (model,
    report: pairs, positive share, training log-loss of the model and of the constant rate)."""
    rows, labels = extent_examples(pages)
    report = {"pairs": int(len(labels)), "positive": round(float(labels.mean()), 4) if len(labels) else 0.0}
    if not len(labels) or labels.min() == labels.max():
        return None, report
    model = AnswerExtent()
    mean, scale = rows.mean(0), rows.std(0) + 1e-6
    model.get_buffer("mean").copy_(torch.from_numpy(mean))
    model.get_buffer("scale").copy_(torch.from_numpy(scale))
    x, y = torch.from_numpy(rows), torch.from_numpy(labels)
    opt = torch.optim.LBFGS(model.linear.parameters(), max_iter=200, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(model(x), y) + l2 * (model.linear.weight**2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    model.eval()
    q = np.clip(model.probabilities(rows), 1e-7, 1 - 1e-7)
    rate = float(labels.mean())
    report["log_loss"] = round(float(-np.mean(labels * np.log(q) + (1 - labels) * np.log(1 - q))), 4)
    report["log_loss_constant"] = round(float(-(rate * np.log(rate) + (1 - rate) * np.log(1 - rate))), 4)
    return model, report
