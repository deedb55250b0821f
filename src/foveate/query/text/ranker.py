"""The learned answer ranker: which OCR line holds the answer to a question (light, per question).

A small network over the (question, line) features of :mod:`.features`::

    u = tanh(A e_q)                                  (8,)   the question's intent, from its MiniLM embedding
    s_i = w . x_i + v . relu(B [x_i | u] + b)        (N,)   one logit per line
    s_0 = c . [u | page]                                    "the answer is not written on any line"

``x_i`` is the standardised feature row of line i; ``page`` = (log lines, best lexical match, best cosine).  The
softmax runs over the page's lines *and* the no-line option, so a line's probability is absolute: a class name
asked of a photo with a shop sign in it, or a handwritten answer OCR did not read, leaves every line improbable.
Trained (``foveate train``, :mod:`foveate.train.ranker`) with a listwise loss: the mass should go to the lines
that hold the answer, or to the no-line option when none does.
Inference is NumPy (single-threaded; on a busy 2-core machine torch's intra-op threads cost more than the
product itself); the module holds the parameters as an ``nn.Module`` so that training and saving are torch's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

import numpy as np
import torch
from torch import nn

from .embed import EMBED_DIM, embed_query, embed_texts
from .features import ANSWER_KINDS, COLUMNS, feature_rows, intent_features, line_features, relation_features
from .handset import handset_features
from .match import question_scores

if TYPE_CHECKING:
    from .layout import TextIndex


def softmax(logits: np.ndarray) -> np.ndarray:
    """The softmax of (N,) logits, in their dtype."""
    e = np.exp(logits - logits.max())
    return e / e.sum()


class AnswerRanker(nn.Module):
    """Logits over a page's OCR lines for a question.

    Args:
        columns: the feature columns it reads (:data:`~.features.COLUMNS`; stored in the weights file).
        kinds: the answer-kind descriptions whose MiniLM embeddings give the intent features.
        intent_dim, hidden: sizes of the question projection and of the hidden layer.
    """

    mean: torch.Tensor  # buffers: the training rows' standardisation
    scale: torch.Tensor

    def __init__(
        self,
        columns: Sequence[str] = COLUMNS,
        kinds: Sequence[str] = ANSWER_KINDS,
        intent_dim: int = 8,
        hidden: int = 32,
        kind_embeddings: np.ndarray | None = None,
    ) -> None:
        super().__init__()
        self.columns, self.kinds = tuple(columns), tuple(kinds)
        unknown = [c for c in self.columns if c not in COLUMNS]
        if unknown:  # a file from a foveate with other features: its rows cannot be computed here
            raise ValueError(f"the answer ranker reads feature columns this foveate does not compute: {unknown[:5]}")
        # the columns it reads, out of the full rows (a ranker trained before a column was added reads the others)
        self._take = None if self.columns == COLUMNS else np.array([COLUMNS.index(c) for c in self.columns])
        f = len(self.columns)
        self.intent_dim, self.hidden = int(intent_dim), int(hidden)
        emb = embed_texts(list(self.kinds)) if kind_embeddings is None else np.asarray(kind_embeddings, np.float32)
        self.register_buffer(
            "kind_embeddings", torch.as_tensor(emb, dtype=torch.float32).reshape(len(self.kinds), EMBED_DIM)
        )
        self.register_buffer("mean", torch.zeros(f))
        self.register_buffer("scale", torch.ones(f))
        self.intent = nn.Linear(EMBED_DIM, self.intent_dim)
        self.layer = nn.Linear(f + self.intent_dim, self.hidden)
        self.out = nn.Linear(self.hidden, 1)
        self.linear = nn.Linear(f, 1)
        self.none = nn.Linear(self.intent_dim + 3, 1)
        self._lex, self._cos = self.columns.index("lex"), self.columns.index("cos")
        self._np: dict[str, np.ndarray] | None = None

    # -- training side (torch) ---------------------------------------------------------------------------
    def forward(self, rows: torch.Tensor, query_embedding: torch.Tensor) -> torch.Tensor:
        """rows (N, F) raw feature rows, query_embedding (384,) -> (N + 1,) logits: the lines, then no line."""
        x = (rows - self.mean) / self.scale
        u = torch.tanh(self.intent(query_embedding.reshape(1, -1)))
        h = torch.relu(self.layer(torch.cat([x, u.expand(len(x), -1)], 1)))
        page = torch.stack(
            [torch.log1p(torch.tensor(float(len(rows)))), rows[:, self._lex].max(), rows[:, self._cos].max()]
        )
        none = self.none(torch.cat([u[0], page]))
        return torch.cat([(self.out(h) + self.linear(x)).squeeze(1), none])

    def set_standardisation(self, rows: np.ndarray) -> None:
        """Standardise features by the training rows' mean and deviation."""
        self.mean.copy_(torch.as_tensor(rows.mean(0), dtype=torch.float32))
        self.scale.copy_(torch.as_tensor(rows.std(0) + 1e-6, dtype=torch.float32))
        self._np = None

    # -- inference side (NumPy) ----------------------------------------------------------------------------
    def _arrays(self) -> dict[str, np.ndarray]:
        if self._np is None:
            # copies, not views: sending the module to another process (``fork_map``) moves its tensors to shared
            # memory and frees their old storage, and a view of it pickled afterwards was garbage
            self._np = {k: v.detach().float().cpu().numpy().copy() for k, v in self.state_dict().items()}
        return self._np

    def train(self, mode: bool = True) -> AnswerRanker:
        self._np = None  # parameters may change: rebuild the NumPy copy on next use
        return super().train(mode)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        self._np = None
        return super().load_state_dict(state_dict, strict=strict, assign=assign)

    def logits(self, rows: np.ndarray, query_embedding: np.ndarray) -> np.ndarray:
        """NumPy inference, the same numbers as :meth:`forward` (up to float rounding).  (N + 1,) float32."""
        a = self._arrays()
        x = (rows - a["mean"]) / a["scale"]
        u = np.tanh(np.einsum("j,ij->i", query_embedding, a["intent.weight"]) + a["intent.bias"])
        hw = a["layer.weight"]
        f = x.shape[1]
        h = np.maximum(np.einsum("nf,hf->nh", x, hw[:, :f]) + (hw[:, f:] @ u + a["layer.bias"]), 0.0)
        s = np.einsum("nh,h->n", h, a["out.weight"][0]) + a["out.bias"][0]
        s += np.einsum("nf,f->n", x, a["linear.weight"][0]) + a["linear.bias"][0]
        page = np.array([np.log1p(len(rows)), rows[:, self._lex].max(), rows[:, self._cos].max()], np.float32)
        none = np.concatenate([u, page]) @ a["none.weight"][0] + a["none.bias"][0]
        return np.append(s, none).astype(np.float32)

    def features(self, index: TextIndex, text: str) -> tuple[np.ndarray, np.ndarray]:
        """The feature rows (N, F) of every line of ``index`` for question ``text`` (the ranker's :attr:`columns`),
        and its embedding (384,)."""
        kinds = self._arrays()["kind_embeddings"]
        key = ("line_features", kinds.tobytes())  # the features depend on the embeddings, not only on their names
        lf = index.cache.get(key)
        if lf is None:
            lf = index.cache[key] = line_features(index, kinds)
        eq = embed_query(text)
        lex, cos = question_scores(index, text)
        rows = feature_rows(
            lf, relation_features(index.boxes, lex, cos), intent_features(eq, kinds), handset_features(index, lex, cos)
        )
        return (rows if self._take is None else np.ascontiguousarray(rows[:, self._take])), eq

    def probabilities(self, index: TextIndex, text: str) -> np.ndarray:
        """(N,) how likely each line holds the answer (the softmax over the lines and the no-line option, without
        the latter: the sum is at most 1; empty for a page without text)."""
        if not index.lines:
            return np.zeros(0, np.float32)
        rows, eq = self.features(index, text)
        return softmax(self.logits(rows, eq))[:-1].astype(np.float32)

    def config(self) -> dict:
        """What rebuilds this architecture (stored in the weights file)."""
        return {
            "columns": list(self.columns),
            "kinds": list(self.kinds),
            "intent_dim": self.intent_dim,
            "hidden": self.hidden,
        }


class RankerEnsemble(nn.Module):
    """Several :class:`AnswerRanker` s fitted from different seeds, their probabilities averaged
    (``foveate train --rankers N``).

    One ranker's answers depend on its seed: on the validation split, five seeds of the recipe put the answer line
    first for 72-77 % of the FUNSD questions and 84.5-87.6 % of all; the mean of three seeds' probabilities 78.0 %
    and 88.5 %.  The shipped weights average three (docs/lab/journal.md, "The ranker's step size decayed, and three
    rankers averaged"; today's seed spread: EVAL.md, "Validation and test").  The members share the feature
    columns and answer kinds, so a question's features are computed once."""

    def __init__(self, members: Sequence[AnswerRanker]) -> None:
        super().__init__()
        if not members:
            raise ValueError("an ensemble needs at least one ranker")
        first = members[0].config()
        if any(m.config() != first for m in members[1:]):
            raise ValueError("the ensemble's rankers read different features")
        self.members = nn.ModuleList(members)

    @property
    def rankers(self) -> list[AnswerRanker]:
        """The members, typed."""
        return [cast(AnswerRanker, m) for m in self.members]

    def features(self, index: TextIndex, text: str) -> tuple[np.ndarray, np.ndarray]:
        return self.rankers[0].features(index, text)

    def logits(self, rows: np.ndarray, query_embedding: np.ndarray) -> np.ndarray:
        """(N + 1,) the log of the members' mean softmax (lines, then no line): a softmax of it is that mean."""
        p = np.zeros(len(rows) + 1, np.float64)
        for m in self.rankers:
            p += softmax(m.logits(rows, query_embedding).astype(np.float64))
        return np.log(np.maximum(p / len(self.members), 1e-30)).astype(np.float32)

    probabilities = AnswerRanker.probabilities  # the softmax of :meth:`logits`, which is the members' mean

    def config(self) -> dict:
        return {**self.rankers[0].config(), "members": len(self.members)}
