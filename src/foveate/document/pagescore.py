"""The page score's parts that belong to the document package (``PAGE_LEXICAL``, ``PAGE_COSINE`` and ``PAGE_SHARE``
are in :mod:`foveate.weights.defaults`): the page theme's weight, and the question-by-page-profile term.

The profile term asks whether the page *looks like* the kind of page the question is about: a page's profile
(:func:`page_profile`: the share of its lines with a money amount, with any digit, with a currency, ending in a
colon, its number of lines, their mean length, and how tall the page is), followed by the page score's own evidence
(:data:`EVIDENCE_COLUMNS`: the likeliest line's log probability, the best lexical match, the best cosine, the theme),
against the question's MiniLM embedding: ``q . (A @ [profile | evidence])``, with ``A`` (384 x 12,
``page_profile.npy``) fitted by ``python scripts/fit_page_profile.py`` on documents of training-split pages (a
conditional logit over each document's pages, the other page-score terms fixed).  "What is the name of the store?"
then leans to a page of prices, and trusts a form's ``Name:`` field less than "the field "Name"" does.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from ..query.text.features import CURRENCY

#: weight of the question's MiniLM cosine to a page's theme (the mean of its lines' embeddings) in the page score
#: (:func:`foveate.document.select.page_scores`): how much what the page as a whole is about counts beside its best
#: line.  Fitted with the other page constants on documents of training-split pages (``python
#: scripts/eval_documents.py --split train --fit``), chosen among the best there on documents of validation-split pages.
PAGE_THEME = 4.0

#: the fitted question-by-profile matrix (384 x len(:data:`MATRIX_COLUMNS`) float32)
PROFILE_FILE = Path(__file__).with_name("page_profile.npy")
#: what a page's profile holds (:func:`page_profile`), in order
PROFILE_COLUMNS = ("money", "digits", "lines", "length", "labels", "currency", "tall", "one")
PROFILE_DIM = len(PROFILE_COLUMNS)
#: the page score's own terms (:func:`foveate.document.select.page_features`), which the question may also lean on:
#: "What is the store's address?" should trust a lexical match less than "the field "Address"" does
EVIDENCE_COLUMNS = ("log_p", "lexical", "cosine", "theme")
#: the matrix's columns: the page's profile, then the evidence
MATRIX_COLUMNS = PROFILE_COLUMNS + EVIDENCE_COLUMNS
_MONEY = re.compile(r"\d+[.,]\d\d\b")


def page_profile(lines: Sequence[str], size: tuple[int, int] | None = None) -> np.ndarray:
    """(:data:`PROFILE_DIM`,) float64, what kind of page this looks like (:data:`PROFILE_COLUMNS`): the share of
    ``lines`` with a money amount (``12.50``), with any digit, log(number of lines) / 5, mean line length / 40, the
    share of lines that end with a colon (a form's labels), the share with a currency sign or code, how tall the page
    is (``log(height / width)`` of ``size`` = (height, width), clipped to [-1, 2]; 0 without it: a till receipt is a
    long strip), and 1 (a constant: the question's own lean to any page, which cancels over pages)."""
    if not lines:
        return np.zeros(PROFILE_DIM)
    tall = float(np.clip(np.log(max(size[0], 1) / max(size[1], 1)), -1.0, 2.0)) if size else 0.0
    return np.array(
        [
            float(np.mean([bool(_MONEY.search(t)) for t in lines])),
            float(np.mean([any(c.isdigit() for c in t) for t in lines])),
            float(np.log(len(lines))) / 5.0,
            float(np.mean([len(t) for t in lines])) / 40.0,
            float(np.mean([t.rstrip().endswith(":") for t in lines])),
            float(np.mean([bool(CURRENCY.search(t)) for t in lines])),
            tall,
            1.0,
        ]
    )


def use_profile_file(path: Path | str | None = None) -> None:
    """Read the question-by-profile matrix from ``path`` (default: the packaged one) from now on: how
    ``scripts/eval_documents.py --profile`` judges a candidate before it ships."""
    global PROFILE_FILE
    PROFILE_FILE = Path(path) if path is not None else Path(__file__).with_name("page_profile.npy")
    profile_matrix.cache_clear()


@lru_cache(maxsize=1)
def profile_matrix() -> np.ndarray | None:
    """(384, len(:data:`MATRIX_COLUMNS`)) float64: the fitted matrix; ``None`` when the package ships none, or one for
    another profile (the term is then left out)."""
    if not PROFILE_FILE.is_file():
        return None
    a = np.load(PROFILE_FILE).astype(np.float64)
    return a if a.ndim == 2 and a.shape == (384, len(MATRIX_COLUMNS)) else None
