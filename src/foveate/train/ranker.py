"""Fit the answer ranker (:class:`foveate.query.text.ranker.AnswerRanker`) on (question, page) pairs.

The target of a question is the set of OCR lines that hold its answer: lines with at least half their area inside
an answer box, or that hold at least half of one.  The loss is listwise: cross-entropy between the softmax over the
page's lines and the uniform distribution over those lines (every line of a multi-line or multi-box answer must be
found, since every box must be legible); a question whose answer no OCR line holds (a class name asked of a photo
with some print in it, handwriting the OCR did not read) teaches the no-line option.

Adam, one question per step, the step size decayed along a cosine to 0 over ``max_epochs``; the epoch kept is the
one with the lowest loss on a held-out tenth of the training pages.  Deterministic for a seed.  Why the decay: at a
constant step size the held-out loss swung by up to 0.1 from one epoch to the next, the epoch kept was a lucky swing,
and stopping after two epochs without progress sometimes stopped at the second; five seeds put the answer line first
for 82-85 % of the validation questions, against 85-89 % with the decay (docs/lab/journal.md, "The ranker's step
size decayed, and three rankers averaged").
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import numpy as np
import torch

from ..core.errors import DatasetError
from ..query.text.layout import text_index
from ..query.text.ranker import AnswerRanker, RankerEnsemble
from .data import Page

#: what :func:`fit_rankers` returns: one ranker, or several averaged
Ranker = AnswerRanker | RankerEnsemble


@dataclass
class Group:
    """One question's training rows: (N, F) features, its embedding (384,), and which lines hold the answer."""

    rows: np.ndarray
    query_embedding: np.ndarray
    positive: np.ndarray
    set: str


def answer_lines(line_boxes: np.ndarray, gt_boxes: np.ndarray, share: float = 0.5) -> np.ndarray:
    """(N,) bool: lines with >= ``share`` of their area inside a ground-truth box, or holding >= ``share`` of one."""
    if not len(line_boxes):
        return np.zeros(0, bool)
    lb, gb = line_boxes[:, None, :], np.asarray(gt_boxes, np.float64)[None, :, :]
    iw = np.clip(np.minimum(lb[..., 2], gb[..., 2]) - np.maximum(lb[..., 0], gb[..., 0]), 0, None)
    ih = np.clip(np.minimum(lb[..., 3], gb[..., 3]) - np.maximum(lb[..., 1], gb[..., 1]), 0, None)
    inter = iw * ih
    la = np.maximum((lb[..., 2] - lb[..., 0]) * (lb[..., 3] - lb[..., 1]), 1e-9)
    ga = np.maximum((gb[..., 2] - gb[..., 0]) * (gb[..., 3] - gb[..., 1]), 1e-9)
    return ((inter / la >= share) | (inter / ga >= share)).any(1)


def text_height_ratio(pages: list[Page]) -> tuple[float, int]:
    """The print's height per OCR box height: the median, over the questions' answer lines (:func:`answer_lines`),
    of the annotated text height over the line box's height; ``(TEXT_HEIGHT, 0)`` when no question has both.
    Returns (ratio, number of lines measured)."""
    from ..query.scorer import TEXT_HEIGHT

    ratios = []
    for page in pages:
        index = text_index(page.texture)
        if index is None or not index.lines:
            continue
        heights = index.boxes[:, 3] - index.boxes[:, 1]
        for s in page.samples:
            if s.heights is None or s.points or not len(s.heights):
                continue
            good = answer_lines(index.boxes, s.boxes) & (heights > 0)
            ratios += (float(np.median(s.heights)) / heights[good]).tolist()
    return (round(float(np.median(ratios)), 4), len(ratios)) if ratios else (TEXT_HEIGHT, 0)


def build_groups(pages: list[Page], ranker: Ranker) -> list[Group]:
    """Feature rows of every text question asked of a page with OCR lines; ``positive`` has one more entry, the
    no-line option (true when no line holds the answer)."""
    groups = []
    for page in pages:
        index = text_index(page.texture)
        if index is None or not index.lines:
            continue
        for s in page.samples:
            if s.text is None:
                continue
            pos = answer_lines(index.boxes, s.boxes)
            pos = np.append(pos, not pos.any())  # the last candidate: no line holds the answer
            rows, eq = ranker.features(index, s.text)
            groups.append(Group(rows, eq, pos, page.set))
    return groups


def answered_questions(pages: list[Page]) -> int:
    """Questions (with text) whose answer an OCR line of their page holds (:func:`answer_lines`): what a ranker
    learns from.  Cheap: no features are computed."""
    n = 0
    for page in pages:
        index = text_index(page.texture)
        if index is None or not index.lines:
            continue
        n += sum(s.text is not None and bool(answer_lines(index.boxes, s.boxes).any()) for s in page.samples)
    return n


def _nothing_to_learn(pages: list[Page], hold: list[Page], what: str) -> str:
    questions = sum(s.text is not None for p in pages for s in p.samples)
    where = (
        f"none of the {len(pages) - len(hold)} images left after holding out {len(hold)} to choose the epoch does"
        if answered_questions(pages)
        else "none does"
    )
    return (
        f"nothing to train the answer ranker on: it learns from questions whose answer box holds an OCR line, and of "
        f"the {questions} questions on the {len(pages)} images of {what}, {where}; give more training images of "
        "printed text with their answers boxed (document data sets or synth:N), or keep a file's ranker with --from"
    )


def check_rankable(pages: list[Page], seed: int, members: int = 1, what: str = "the training split") -> None:
    """Whether :func:`fit_rankers` (``seed``, ``members``) will find a question answered on an OCR line in every
    member's fitted pages (each holds out its own tenth): a :class:`~foveate.core.errors.DatasetError` that says what
    is missing, before any ranker is fitted (or forked)."""
    for i in range(max(1, members)):
        hold, fit = held_out_pages(pages, random.Random(seed + i))
        if not answered_questions(fit):
            raise DatasetError(_nothing_to_learn(pages, hold, what))


def _loss(ranker: AnswerRanker, g: Group, tensors: dict) -> torch.Tensor:
    rows, eq, pos = tensors[id(g)]
    logp = torch.log_softmax(ranker(rows, eq), 0)
    return -logp[pos].mean()


def mean_loss(ranker: AnswerRanker, groups: list[Group], tensors: dict) -> float:
    """The mean loss of ``groups`` (no gradient): the held-out loss :func:`fit_ranker` chooses its epoch by."""
    with torch.no_grad():
        return float(np.mean([float(_loss(ranker, g, tensors)) for g in groups]))


def held_out_pages(pages: list[Page], rng: random.Random) -> tuple[list[Page], list[Page]]:
    """(held out, fitted): a tenth of ``pages`` (at least one) drawn with ``rng``, and the rest."""
    order = sorted(range(len(pages)), key=lambda i: (pages[i].set, pages[i].image))
    rng.shuffle(order)
    n_hold = max(1, len(order) // 10)
    return [pages[i] for i in order[:n_hold]], [pages[i] for i in order[n_hold:]]


def _tensors(groups: list[Group]) -> dict:
    return {
        id(g): (
            torch.from_numpy(g.rows),
            torch.from_numpy(g.query_embedding.astype(np.float32)),
            torch.from_numpy(g.positive),
        )
        for g in groups
    }


def top_k_accuracy(ranker: Ranker, groups: list[Group], k: int = 1) -> float:
    """Share of the questions answered on a line whose ``k`` most probable lines include an answer line."""
    groups = [g for g in groups if g.positive[:-1].any()]
    if not groups:
        return float("nan")
    hits = 0
    for g in groups:
        s = ranker.logits(g.rows, g.query_embedding)[:-1]
        hits += bool(g.positive[:-1][np.argsort(-s, kind="stable")[:k]].any())
    return hits / len(groups)


def fit_ranker(
    pages: list[Page],
    seed: int = 0,
    max_epochs: int = 12,
    lr: float = 3e-3,
    weight_decay: float = 1e-4,
    hidden: int = 32,
    intent_dim: int = 8,
    columns: tuple[str, ...] | None = None,
    log=print,
) -> tuple[AnswerRanker, dict]:
    """Train a ranker on ``pages`` (the training split) for ``max_epochs`` epochs, the step size decaying from ``lr``
    to 0.  A tenth of the pages (by a seeded draw) is held out to choose the epoch; the returned ranker is the best
    epoch's; ``columns``: the feature columns it reads (default every one).  Returns (ranker, report)."""
    torch.manual_seed(seed)
    ranker = (
        AnswerRanker(hidden=hidden, intent_dim=intent_dim)
        if columns is None
        else AnswerRanker(columns, hidden=hidden, intent_dim=intent_dim)
    )
    rng = random.Random(seed)  # draws the held-out pages, then every epoch's order
    hold, fit = held_out_pages(pages, rng)
    if not answered_questions(fit):
        raise DatasetError(_nothing_to_learn(pages, hold, "the pages given"))
    train_groups, hold_groups = build_groups(fit, ranker), build_groups(hold, ranker)
    ranker.set_standardisation(np.concatenate([g.rows for g in train_groups]))
    tensors = _tensors(train_groups + hold_groups)
    # balance the sets: each set's questions weigh as much in total as any other set's
    per_set: dict[str, int] = {}
    for g in train_groups:
        per_set[g.set] = per_set.get(g.set, 0) + 1
    weight = {k: len(train_groups) / (len(per_set) * v) for k, v in per_set.items()}
    opt = torch.optim.Adam(ranker.parameters(), lr=lr, weight_decay=weight_decay)
    steps = max_epochs * len(train_groups)
    decay = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: 0.5 * (1.0 + math.cos(math.pi * min(t, steps) / steps)))
    best, best_epoch, best_state, history = float("inf"), 0, None, []
    for epoch in range(max_epochs):
        ranker.train()
        idx = list(range(len(train_groups)))
        rng.shuffle(idx)
        total = 0.0
        for i in idx:
            g = train_groups[i]
            loss = _loss(ranker, g, tensors) * weight[g.set]
            opt.zero_grad()
            loss.backward()
            opt.step()
            decay.step()
            total += float(loss.detach())
        ranker.eval()
        held = mean_loss(ranker, hold_groups, tensors) if hold_groups else total
        history.append(
            {"epoch": epoch + 1, "train_loss": round(total / len(train_groups), 4), "held_out_loss": round(held, 4)}
        )
        log(f"  ranker epoch {epoch + 1}: train loss {total / len(train_groups):.3f}, held-out loss {held:.3f}")
        if held < best - 1e-4:
            best, best_epoch, best_state = held, epoch, {k: v.clone() for k, v in ranker.state_dict().items()}
    ranker.load_state_dict(best_state)
    ranker.eval()
    report = {
        "epochs": best_epoch + 1,
        "questions": len(train_groups),
        "held_out_questions": len(hold_groups),
        "history": history,
        "held_out_top1": round(top_k_accuracy(ranker, hold_groups, 1), 4),
        "held_out_top3": round(top_k_accuracy(ranker, hold_groups, 3), 4),
    }
    return ranker, report


def fit_rankers(pages: list[Page], seed: int = 0, members: int = 1, log=print, **kw) -> tuple[Ranker, dict]:
    """``members`` rankers from seeds ``seed``, ``seed + 1``, ... (each its own held-out tenth and order), averaged
    (:class:`~foveate.query.text.ranker.RankerEnsemble`); one member is a plain ranker.  Returns (ranker, report):
    the first member's report, plus every member's seed, epochs and held-out accuracy."""
    fitted = []
    for i in range(max(1, members)):
        if members > 1:
            log(f"ranker {i + 1} of {members} (seed {seed + i})")
        fitted.append(fit_ranker(pages, seed=seed + i, log=log, **kw))
    if len(fitted) == 1:
        return fitted[0]
    report = dict(fitted[0][1])
    report["members"] = [
        {
            "seed": seed + i,
            "epochs": r["epochs"],
            "held_out_top1": r["held_out_top1"],
            "held_out_top3": r["held_out_top3"],
        }
        for i, (_, r) in enumerate(fitted)
    ]
    return RankerEnsemble([m for m, _ in fitted]).eval(), report
