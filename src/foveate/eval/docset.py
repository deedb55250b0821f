"""Multi-page evaluation documents whose every question is about one page.

A document is drawn from single annotated pages (scanned forms, receipts, generated born-digital pages).  A question
of one of its pages is *about that page* only if the document determines the page: "How much tax was charged?" in a
document of three receipts fits every receipt, and no system can know which is meant.  The rule
(:func:`about_one_page`), decided from the annotations alone (never from what OCR read):

* a **quoting** question (it quotes its page's text: a form field's label, a heading, a phrase in quotes) is kept when
  the quoted text is printed on no other page of the document (as a whole line, or words within one, of that page's
  annotated text) and no other page has a question quoting the same text;
* an **unquoted** question (a receipt's "What is the total?", a generated page's "Who issued it?") is kept only on a
  bill (a receipt or an invoice) that is the document's only bill, and only when it speaks of the purchase
  (:data:`PURCHASE_WORDS`: "receipt", "store", "tax", "total", ...): a generated page's "What is the date?" or
  "Who issued it?" fits any dated or signed page of the document and is dropped.

:func:`draw_document` draws the pages of a document of a given composition: ``forms`` (forms only, scanned and
generated) and ``expense`` (one bill among forms and letters, as an expense report is).  Documents of several
receipts, where most questions fit every receipt, are what :func:`about_one_page` rules out: an evaluation that
reports them anyway (every question kept) must label them as such.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

#: page kinds that are bills: their unquoted questions (total, tax, date of purchase) fit any bill
BILLS = frozenset({"receipt", "invoice"})
#: the words by which an unquoted question speaks of the purchase (and so of the document's only bill)
PURCHASE_WORDS = frozenset(
    "receipt store shop merchant purchase bought paid total subtotal tax vat tip invoice vendor due owe change "
    "cashier".split()
)


def norm(text: str) -> str:
    """Lower-case words of letters and digits joined by one space: ``'DATE:'`` -> ``'date'``."""
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def quoted(question: str, meta: dict[str, Any]) -> str | None:
    """The page text ``question`` quotes, normalized (:func:`norm`): the annotated field label (``key_text``), else
    the text between double quotes; ``None`` for an unquoted question."""
    if meta.get("key_text"):
        return norm(str(meta["key_text"])) or None
    m = re.search(r'"([^"]+)"', question)
    return (norm(m.group(1)) or None) if m else None


@dataclass(frozen=True)
class SetPage:
    """One page a document can be drawn from: ``kind`` (``form``, ``receipt``, ``invoice``, ``letter``), the
    normalized texts printed on it as annotated (``texts``; empty where the set annotates only its answers) and its
    questions, ``(question, meta)`` with meta as the ``queries.jsonl`` line."""

    name: str
    kind: str
    texts: frozenset[str] = frozenset()
    questions: tuple[tuple[str, dict[str, Any]], ...] = field(default=())


def _printed(q: str, texts: frozenset[str]) -> bool:
    return any(f" {q} " in f" {t} " for t in texts)


def about_one_page(pages: Sequence[SetPage], target: int) -> list[int]:
    """Indices of ``pages[target]``'s questions that are about that page in the document ``pages`` (the module's
    rule)."""
    others = [p for i, p in enumerate(pages) if i != target]
    other_quotes = {quoted(t, m) for p in others for t, m in p.questions} - {None}
    page = pages[target]
    only_bill = page.kind in BILLS and not any(p.kind in BILLS for p in others)
    keep = []
    for k, (text, meta) in enumerate(page.questions):
        q = quoted(text, meta)
        if q is not None:
            if q not in other_quotes and not any(_printed(q, p.texts) for p in others):
                keep.append(k)
        elif only_bill and set(norm(text).split()) & PURCHASE_WORDS:
            keep.append(k)
    return keep


def draw_document(
    rng: random.Random, pools: dict[str, Sequence[SetPage]], n_pages: int, composition: str
) -> list[SetPage]:
    """``n_pages`` distinct pages in random order: ``forms``: from ``pools["form"]``; ``expense``: one page of
    ``pools["bill"]`` among ``pools["form"]`` and ``pools["letter"]``.  Fewer when the pools run out."""
    if composition == "forms":
        return rng.sample(list(pools["form"]), min(n_pages, len(pools["form"])))
    if composition != "expense":
        raise ValueError(f"unknown composition {composition!r}; choose forms or expense")
    rest = list(pools["form"]) + list(pools.get("letter", ()))
    pages = [rng.choice(list(pools["bill"]))] + rng.sample(rest, min(n_pages - 1, len(rest)))
    rng.shuffle(pages)
    return pages
