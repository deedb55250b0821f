"""The page score's parts that belong to the document package (``PAGE_LEXICAL``, ``PAGE_COSINE`` and ``PAGE_SHARE``
are in :mod:`foveate.weights.defaults`): the page theme's weight, and the question-by-page-profile term.

The profile term asks whether the page *looks like* the kind of page the question is about: a page's profile
(:func:`page_profile`: the share of its lines with a money amount, with any digit, its number of lines and their mean
length) against the question's MiniLM embedding, ``q . (A @ profile)``, with ``A`` (384 x 5, ``page_profile.npy``)
fitted by ``python scripts/fit_page_profile.py`` on documents of training-split pages (a conditional logit over each
document's pages, the other page-score terms fixed).  "What is the name of the store?" then leans to a page of
prices rather than to a form's ``Name:`` field.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

#: weight of the question's MiniLM cosine to a page's theme (the mean of its lines' embeddings) in the page score
#: (:func:`foveate.document.select.page_scores`): how much what the page as a whole is about counts beside its best
#: line.  Fitted with the other page constants on documents of training-split pages (``python
#: scripts/eval_documents.py --split train --fit``), chosen among the best there on documents of validation-split pages.
PAGE_THEME = 4.0

#: the fitted question-by-profile matrix (384 x 5 float32)
PROFILE_FILE = Path(__file__).with_name("page_profile.npy")
PROFILE_DIM = 5
_MONEY = re.compile(r"\d+[.,]\d\d\b")


def page_profile(lines: Sequence[str]) -> np.ndarray:
    """(5,) float64: the share of ``lines`` with a money amount (``12.50``), with any digit, log(number of lines) / 5,
    mean line length / 40, and 1 (a constant: the question's own lean to any page, which cancels over pages)."""
    if not lines:
        return np.zeros(PROFILE_DIM)
    return np.array(
        [
            float(np.mean([bool(_MONEY.search(t)) for t in lines])),
            float(np.mean([any(c.isdigit() for c in t) for t in lines])),
            float(np.log(len(lines))) / 5.0,
            float(np.mean([len(t) for t in lines])) / 40.0,
            1.0,
        ]
    )


@lru_cache(maxsize=1)
def profile_matrix() -> np.ndarray | None:
    """(384, 5) float64: the fitted matrix; ``None`` when the package ships none (the term is then left out)."""
    if not PROFILE_FILE.is_file():
        return None
    a = np.load(PROFILE_FILE).astype(np.float64)
    return a if a.ndim == 2 and a.shape[1] == PROFILE_DIM else None
