"""The answer's extent (light, per question): which neighbours of a likely answer line belong to the same answer.

One answer is often more than one OCR line: a value printed in two pieces on its row ("<1 mm   13.0 mm from end"),
a box ticked beside its caption, an address over three lines.  Its ground-truth box then spans the lines *and* the
blank between them, and painting the lines alone leaves that blank blurred: the answer is not legible as a whole.

So for a line ``i`` the ranker finds likely (:mod:`.ranker`) and each of its layout neighbours ``j`` -- the next two
lines to its right on the row, the next three below it, the nearest to its left and above it
(:func:`candidate_pairs`, from :func:`.layout.layout_neighbours`) -- a logistic model gives ``q_ij``, the
probability that ``j`` belongs to the same answer as ``i`` when ``i`` holds it, from their relation (which
neighbour, gaps and alignment in line heights, heights), what both lines look like
(:func:`.features.content_features`) and how well each matches the question (a line that repeats the question is its
label, not its answer).  The text term then also paints the hull of ``i`` and ``j`` with probability ``p_i q_ij``
(:func:`answer_regions`).  ``foveate train`` fits the model on the training pages' answer boxes
(:mod:`foveate.train.extent`); a weights file without one paints the lines alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from .features import CONTENT_COLUMNS, line_contents

if TYPE_CHECKING:
    from .layout import TextIndex

#: how a candidate ``j`` sits relative to the anchor line ``i``, in :func:`candidate_pairs`' order
RELATIONS = ("right1", "right2", "below1", "below2", "below3", "left", "above")
GEOMETRY_COLUMNS = ("gap_x", "gap_y", "log_height_ratio", "left_offset", "x_overlap")
MATCH_COLUMNS = ("lex", "cos", "anchor_lex", "anchor_cos")
#: every column of a pair's feature row, in order
COLUMNS = (
    tuple(f"rel:{r}" for r in RELATIONS)
    + GEOMETRY_COLUMNS
    + MATCH_COLUMNS
    + tuple(f"content:{c}" for c in CONTENT_COLUMNS)
    + tuple(f"anchor:{c}" for c in CONTENT_COLUMNS)
)
#: anchors below this probability get no regions (their painted value would be near the background)
MIN_ANCHOR = 0.01


def candidate_pairs(right: np.ndarray, below: np.ndarray) -> np.ndarray:
    """(P, 3) int64 rows ``(i, j, relation)``: every line's layout neighbours (:data:`RELATIONS`), each ``j`` once per
    ``i`` (its first relation), never ``i`` itself.  A chain stops where it ends or comes back to ``i``; ``left`` and
    ``above`` are the lowest-numbered lines whose right / lower neighbour ``i`` is.  Sorted by ``i``, then relation."""
    right, below = np.asarray(right, np.int64), np.asarray(below, np.int64)
    n = len(right)
    if n == 0:
        return np.zeros((0, 3), np.int64)
    line = np.arange(n)

    def step(nxt: np.ndarray, j: np.ndarray) -> np.ndarray:
        return np.where(j >= 0, nxt[np.maximum(j, 0)], -1)

    def inverse(nxt: np.ndarray) -> np.ndarray:
        inv = np.full(n, n, np.int64)
        ok = nxt >= 0
        np.minimum.at(inv, nxt[ok], line[ok])
        return np.where(inv < n, inv, -1)

    r1 = right
    r2 = step(right, r1)
    b1 = below
    b2 = step(below, b1)
    b2 = np.where(b1 == line, -1, b2)
    b3 = np.where((b2 == line) | (b2 < 0), -1, step(below, b2))
    cols = [r1, np.where(r1 == line, -1, r2), b1, b2, b3, inverse(right), inverse(below)]
    i = np.repeat(line, len(cols))
    j = np.stack(cols, 1).reshape(-1)
    rel = np.tile(np.arange(len(cols)), n)
    ok = (j >= 0) & (j != i)
    i, j, rel = i[ok], j[ok], rel[ok]
    _, first = np.unique(i * n + j, return_index=True)  # keyed by (i, j); the first row is the first relation
    keep = np.sort(first)
    return np.stack([i[keep], j[keep], rel[keep]], 1)


def pair_features(
    boxes: np.ndarray, content: np.ndarray, pairs: np.ndarray, lexical: np.ndarray, cosine: np.ndarray
) -> np.ndarray:
    """(P, len(COLUMNS)) float32 feature rows of ``pairs`` (:func:`candidate_pairs`).

    Args:
        boxes: (N, 4) line boxes.  content: (N, 15) :func:`.features.content_features` of every line.
        lexical, cosine: (N,) each line's lexical match and MiniLM cosine to the question.
    Geometry in the anchor's line heights: the horizontal gap (right / left neighbours), the vertical gap (below /
    above), the log height ratio, the left edges' offset and the horizontal overlap over the narrower line.
    """
    i, j, rel = pairs[:, 0], pairs[:, 1], pairs[:, 2]
    b = np.asarray(boxes, np.float64)
    x0, y0, x1, y1 = b[i].T
    a0, c0, a1, c1 = b[j].T
    h = np.maximum(y1 - y0, 1.0)
    hj = np.maximum(c1 - c0, 1.0)
    onehot = np.eye(len(RELATIONS))[rel]
    right, below = rel <= 1, (rel >= 2) & (rel <= 4)
    left, above = rel == 5, rel == 6
    gap_x = np.where(right, (a0 - x1) / h, np.where(left, (x0 - a1) / h, 0.0))
    gap_y = np.where(below, (c0 - y1) / h, np.where(above, (y0 - c1) / h, 0.0))
    overlap = (np.minimum(x1, a1) - np.maximum(x0, a0)) / np.maximum(np.minimum(x1 - x0, a1 - a0), 1.0)
    geometry = np.stack(
        [
            np.clip(gap_x, -2, 20) / 5,
            np.clip(gap_y, -2, 10) / 3,
            np.log(hj / h),
            np.abs(a0 - x0) / h / 5,
            np.clip(overlap, -5, 1),
        ],
        1,
    )
    match = np.stack([lexical[j], cosine[j], lexical[i], cosine[i]], 1)
    return np.concatenate([onehot, geometry, match, content[j], content[i]], 1).astype(np.float32)


def page_pairs(index: TextIndex) -> np.ndarray:
    """:func:`candidate_pairs` of the index's lines (cached with the index)."""
    p = index.cache.get("pairs")
    if p is None:
        p = index.cache["pairs"] = candidate_pairs(index.right, index.below)
    return p


def hulls(boxes: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """(P, 4) the box around both lines of each pair."""
    bi, bj = boxes[pairs[:, 0]], boxes[pairs[:, 1]]
    return np.concatenate([np.minimum(bi[:, :2], bj[:, :2]), np.maximum(bi[:, 2:], bj[:, 2:])], 1)


class AnswerExtent(nn.Module):
    """``q_ij``: a logistic model over standardised :data:`COLUMNS` rows (trained by :mod:`foveate.train.extent`)."""

    mean: torch.Tensor  # buffers: the training pairs' standardisation
    scale: torch.Tensor

    def __init__(self, columns: Sequence[str] = COLUMNS) -> None:
        super().__init__()
        self.columns = tuple(columns)
        if self.columns != COLUMNS:  # the rows are computed here: a model of other columns cannot read them
            raise ValueError(
                f"the extent model reads {len(self.columns)} columns that are not this foveate's "
                f"{len(COLUMNS)} pair features"
            )
        f = len(self.columns)
        self.register_buffer("mean", torch.zeros(f))
        self.register_buffer("scale", torch.ones(f))
        self.linear = nn.Linear(f, 1)
        nn.init.zeros_(self.linear.weight)
        nn.init.zeros_(self.linear.bias)

    def forward(self, rows: torch.Tensor) -> torch.Tensor:
        """(P, F) raw rows -> (P,) logits."""
        return self.linear((rows - self.mean) / self.scale)[:, 0]

    def probabilities(self, rows: np.ndarray) -> np.ndarray:
        """NumPy inference: (P,) float64 ``q``."""
        w = self.linear.weight.detach().numpy()[0].astype(np.float64)
        mean, scale = self.mean.numpy().astype(np.float64), self.scale.numpy().astype(np.float64)
        z = ((rows - mean) / scale) @ w + float(self.linear.bias.detach()[0])
        return 1.0 / (1.0 + np.exp(-np.clip(z, -60.0, 60.0)))

    def config(self) -> dict:
        return {"columns": list(self.columns)}


def answer_regions(
    index: TextIndex, probs: np.ndarray, lexical: np.ndarray, cosine: np.ndarray, extent: AnswerExtent
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The pairs ``(i, j, relation)`` of each likely line (probability >= :data:`MIN_ANCHOR`) with its candidate
    neighbours, their hulls, their probabilities ``p_i q_ij`` and the smaller of the two lines' heights:
    ``((R, 3) int64, (R, 4), (R,), (R,))``, empty when no line is likely."""
    pairs = page_pairs(index)
    pairs = pairs[np.asarray(probs)[pairs[:, 0]] >= MIN_ANCHOR] if len(pairs) else pairs
    if not len(pairs):
        return pairs.reshape(0, 3), np.zeros((0, 4)), np.zeros(0), np.zeros(0)
    rows = pair_features(index.boxes, line_contents(index), pairs, lexical, cosine)
    q = extent.probabilities(rows)
    h = index.boxes[:, 3] - index.boxes[:, 1]
    return (
        pairs,
        hulls(index.boxes, pairs),
        np.asarray(probs, np.float64)[pairs[:, 0]] * q,
        np.minimum(h[pairs[:, 0]], h[pairs[:, 1]]),
    )
