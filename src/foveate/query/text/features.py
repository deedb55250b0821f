"""Features of (question, OCR line) pairs for the learned answer ranker (:mod:`.ranker`).  Pure NumPy.

Where is the answer to a question on a page?  A line is a good candidate when

* it *is* what the question names (a heading, a label that holds its value: ``TOTAL 12.50``) -- lexical and
  semantic match of the line itself;
* it sits where a value sits relative to a line that matches the question -- right of it on the same row, or
  under it -- whatever the page's layout (:func:`relation_features`);
* its content is of the kind the question asks for (a date, an amount, a name, an address, a phone number ...)
  and it sits where such answers sit (a header, a right-aligned column, the last amount of the page):
  :func:`line_features` describe every line once per page, and :func:`intent_features` say how much the
  question sounds like each kind of answer (MiniLM similarity to a short description of each kind, so an
  unseen phrasing of "how much was paid?" still lands near "an amount of money");
* the hand-set rule paints it: as a match, or as the value right of or below a matched label
  (:data:`HANDSET_COLUMNS`, computed by :func:`.handset.handset_features`).

No feature names a form's label or a data set's layout: what the ranker learns from them has to carry to
documents of kinds it was not trained on.  Column names are recorded in the weights file, so a ranker and the
features it was trained on cannot be mixed up silently.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .layout import TextIndex

MONEY = re.compile(r"(?<![\d/:])\d{1,3}(?:[,.\s]?\d{3})*[.,]\d{2}(?![\d/:])")
CURRENCY = re.compile(r"[$£€¥₹]|\b(?:rm|rs|usd|eur|gbp|sgd|inr|chf)\b", re.I)
_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?"
DATE = re.compile(
    rf"\b\d{{1,4}}[/.\-]\d{{1,2}}[/.\-]\d{{2,4}}\b|\b\d{{1,2}}\s*{_MONTH}\s*,?\s*\d{{2,4}}\b"
    rf"|\b{_MONTH}\s*\d{{1,2}}\s*,?\s*\d{{2,4}}\b",
    re.I,
)
TIME = re.compile(r"\b\d{1,2}:\d{2}(?::\d{2})?\s*(?:[ap]\.?m\.?)?", re.I)
PHONE = re.compile(r"\+?\d[\d\s().\-]{6,}\d")
PERCENT = re.compile(r"\d\s*%")
WEB = re.compile(r"@|www|\.com\b|https?:", re.I)

#: What kinds of answer a question can ask for; a question's intent features are its MiniLM cosine to each.
ANSWER_KINDS = (
    "a date",
    "a time of day",
    "an amount of money, a price or a total",
    "the name of a company, store or shop",
    "a person's name",
    "a street address",
    "a phone number",
    "a reference number or code",
    "a quantity, how many",
    "an email address",
)

CONTENT_COLUMNS = (
    "length",
    "digits",
    "letters",
    "upper",
    "money",
    "date",
    "time",
    "phone",
    "ends_colon",
    "currency",
    "words",
    "numeric_only",
    "percent",
    "web",
    "inner_colon",
)
LAYOUT_COLUMNS = (
    "y",
    "x",
    "x0",
    "x1",
    "log_height",
    "height_rank",
    "y_rank",
    "y_rank_up",
    "money_rank",
    "last_money",
    "log_row_lines",
    "rightmost",
    "leftmost",
    "right_margin",
    "first_lines",
    "height_share",
)
RELATION_COLUMNS = (
    "lex",
    "cos",
    "left_lex",
    "left_cos",
    "row_lex",
    "row_cos",
    "above_lex",
    "above_cos",
    "col_lex",
    "col_cos",
    "lex_gap",
    "cos_gap",
    "match_gap",
    "near_best_y",
    "near_best_x",
    "is_best",
    "right_of_best",
    "below_best",
)
INTENT_COLUMNS = tuple(f"ask:{k}" for k in ANSWER_KINDS)
LINE_KIND_COLUMNS = tuple(f"is:{k}" for k in ANSWER_KINDS)
#: what the hand-set rule paints on the line (:func:`.handset.handset_features`): as a match, as a value right of one
#: (or continuing it), as a value below one
HANDSET_COLUMNS = ("handset_match", "handset_right", "handset_below")
#: every column of a feature row, in order
COLUMNS = CONTENT_COLUMNS + LAYOUT_COLUMNS + RELATION_COLUMNS + INTENT_COLUMNS + LINE_KIND_COLUMNS + HANDSET_COLUMNS


def content_features(text: str) -> list[float]:
    """What a line's characters look like (:data:`CONTENT_COLUMNS`), each in [0, 1] or a small log."""
    t = text.strip()
    n = max(len(t), 1)
    digits = sum(c.isdigit() for c in t)
    letters = sum(c.isalpha() for c in t)
    upper = sum(c.isupper() for c in t)
    ph = PHONE.search(t)
    phone = ph is not None and sum(c.isdigit() for c in ph.group()) >= 7 and DATE.search(t) is None
    return [
        np.log1p(len(t)) / 4,
        digits / n,
        letters / n,
        upper / max(letters, 1),
        float(MONEY.search(t) is not None),
        float(DATE.search(t) is not None),
        float(TIME.search(t) is not None),
        float(phone),
        float(t.endswith(":")),
        float(CURRENCY.search(t) is not None),
        np.log1p(len(t.split())) / 2,
        float(letters == 0 and digits > 0),
        float(PERCENT.search(t) is not None),
        float(WEB.search(t) is not None),
        float(":" in t[:-1]),
    ]


def money_value(text: str) -> float | None:
    """The last amount of money written in ``text`` (``1,234.50``, ``12,50``), or ``None``."""
    found = MONEY.findall(text)
    if not found:
        return None
    s = re.sub(r"[,.\s](?=\d{3}(?!\d))", "", found[-1].replace(" ", ""))
    try:
        return float(s.replace(",", "."))
    except ValueError:
        return None


def _ranks(values: np.ndarray) -> np.ndarray:
    """Rank of each value in [0, 1] (0 = smallest), ties by position."""
    n = len(values)
    return np.argsort(np.argsort(values, kind="stable"), kind="stable") / max(n - 1, 1)


def same_row(boxes: np.ndarray) -> np.ndarray:
    """(N, N) bool: the lines overlap vertically by at least half the smaller height (diagonal True)."""
    y0, y1 = boxes[:, 1], boxes[:, 3]
    h = np.maximum(y1 - y0, 1.0)
    overlap = np.minimum(y1[:, None], y1[None, :]) - np.maximum(y0[:, None], y0[None, :])
    return overlap >= 0.5 * np.minimum(h[:, None], h[None, :])


def layout_features(boxes: np.ndarray, texts: list[str], image_size: tuple[int, int]) -> np.ndarray:
    """Where each line sits on the page (:data:`LAYOUT_COLUMNS`): position, size relative to the page's print,
    order top to bottom, amounts ranked by value and the last one, lines sharing its row.  (N, 16) float32."""
    n = len(boxes)
    h_img, w_img = image_size
    x0, y0, x1, y1 = boxes.T
    h = np.maximum(y1 - y0, 1.0)
    row = same_row(boxes)
    money = np.array([v if (v := money_value(t)) is not None else -1.0 for t in texts])
    has_money = money >= 0
    money_rank, last_money = np.zeros(n), np.zeros(n)
    if has_money.any():
        money_rank[has_money] = (_ranks(money[has_money]) * max(has_money.sum() - 1, 1) + 1) / has_money.sum()
        last_money[int(np.argmax(np.where(has_money, y0, -np.inf)))] = 1.0
    right_of = row & (x0[None, :] > x0[:, None])
    left_of = row & (x0[None, :] < x0[:, None])
    y_rank = _ranks((y0 + y1) / 2)
    return np.stack(
        [
            (y0 + y1) / 2 / h_img,
            (x0 + x1) / 2 / w_img,
            x0 / w_img,
            x1 / w_img,
            np.log(h / np.median(h)),
            _ranks(h),
            y_rank,
            1.0 - y_rank,
            money_rank,
            last_money,
            np.log(row.sum(1)),
            ~right_of.any(1),
            ~left_of.any(1),
            np.minimum((x1.max() - x1) / w_img * 5.0, 1.0),
            np.arange(n) < 3,
            np.log1p(h / h_img * 100.0) / 3.0,
        ],
        1,
    ).astype(np.float32)


def line_contents(index: TextIndex) -> np.ndarray:
    """(N, 15) :func:`content_features` of every line (kept with the index: the ranker and the extent model read
    them)."""
    c = index.cache.get("content")
    if c is None:
        c = index.cache["content"] = np.array([content_features(ln.text) for ln in index.lines], np.float32).reshape(
            len(index.lines), len(CONTENT_COLUMNS)
        )
    return c


def line_features(index: TextIndex, kind_embeddings: np.ndarray) -> np.ndarray:
    """The question-independent part of every line's feature row: content, layout, and the line's own MiniLM
    similarity to each kind of answer.  (N, 15 + 16 + K) float32; computed once per texture."""
    texts = [ln.text for ln in index.lines]
    if not texts:
        return np.zeros((0, len(CONTENT_COLUMNS) + len(LAYOUT_COLUMNS) + len(LINE_KIND_COLUMNS)), np.float32)
    content = line_contents(index)
    layout = layout_features(index.boxes, texts, index.image_size)
    kinds = (index.embeddings @ kind_embeddings.T).astype(np.float32)
    return np.concatenate([content, layout, kinds], 1)


def relation_features(boxes: np.ndarray, lexical: np.ndarray, cosine: np.ndarray) -> np.ndarray:
    """How each line relates to the lines that match the question (:data:`RELATION_COLUMNS`).

    Args:
        boxes: (N, 4) line boxes.  lexical: (N,) lexical match of each line to the question in [0, 1].
        cosine: (N,) MiniLM cosine of each line to the question.
    Returns:
        (N, 18) float32: the line's own match; the best match among the nearest line to its left on the same
        row, any line to its left on the row, the nearest line above it and the lines above it in its column
        (within 4 line heights); its gap to the page's best match; its distance (in the best line's heights) to
        the best-matching line and whether it sits right of or below it.
    """
    n = len(boxes)
    x0, y0, x1, y1 = boxes.T
    h = np.maximum(y1 - y0, 1.0)
    row = same_row(boxes)
    left = row & (x1[None, :] <= x0[:, None] + 0.3 * h[:, None])  # left[i, j]: j ends left of where i starts
    np.fill_diagonal(left, False)
    nearest_left = np.where(left.any(1), np.where(left, x0[:, None] - x1[None, :], np.inf).argmin(1), -1)
    span = np.minimum(x1[None, :], x1[:, None] + 2 * h[:, None]) - np.maximum(x0[None, :], x0[:, None] - 2 * h[:, None])
    gap_y = y0[:, None] - y1[None, :]
    above = (span > 0) & (gap_y >= -0.3 * h[:, None]) & (gap_y <= 4 * h[:, None]) & ~row  # above[i, j]: j over i
    np.fill_diagonal(above, False)
    nearest_above = np.where(above.any(1), np.where(above, gap_y, np.inf).argmin(1), -1)

    def at(v: np.ndarray, j: np.ndarray) -> np.ndarray:
        return np.where(j >= 0, v[np.maximum(j, 0)], 0.0)

    def best_of(v: np.ndarray, mask: np.ndarray) -> np.ndarray:
        return np.where(mask.any(1), np.where(mask, v[None, :], 0.0).max(1), 0.0).clip(0.0)

    match = np.maximum(lexical, np.clip((cosine - 0.2) / 0.5, 0.0, 1.0))
    best = int(np.argmax(match))
    hb = h[best]
    dy = ((y0 + y1) - (y0[best] + y1[best])) / 2 / hb
    dx = (x0 - x1[best]) / hb
    is_best = np.arange(n) == best
    return np.stack(
        [
            lexical,
            cosine,
            at(lexical, nearest_left),
            at(cosine, nearest_left),
            best_of(lexical, left),
            best_of(cosine, left),
            at(lexical, nearest_above),
            at(cosine, nearest_above),
            best_of(lexical, above),
            best_of(cosine, above),
            lexical - lexical.max(),
            cosine - cosine.max(),
            match - match.max(),
            np.exp(-np.abs(dy) / 3.0),
            np.exp(-np.abs(dx) / 10.0) * row[best],
            match.max() * is_best,
            row[best] & (x0 >= x1[best] - 0.3 * hb) & ~is_best,
            above[:, best].astype(np.float64),
        ],
        1,
    ).astype(np.float32)


def intent_features(query_embedding: np.ndarray, kind_embeddings: np.ndarray) -> np.ndarray:
    """(K,) float32: the question's MiniLM cosine to each kind of answer in :data:`ANSWER_KINDS`."""
    return (kind_embeddings @ query_embedding).astype(np.float32)


def feature_rows(line_feats: np.ndarray, relations: np.ndarray, intent: np.ndarray, handset: np.ndarray) -> np.ndarray:
    """Assemble (N, len(COLUMNS)) rows in :data:`COLUMNS` order from the per-page, per-query parts."""
    n = len(line_feats)
    c, lay = len(CONTENT_COLUMNS), len(LAYOUT_COLUMNS)
    return np.concatenate(
        [
            line_feats[:, : c + lay],
            relations,
            np.broadcast_to(intent, (n, len(intent))),
            line_feats[:, c + lay :],
            handset,
        ],
        1,
    ).astype(np.float32)
