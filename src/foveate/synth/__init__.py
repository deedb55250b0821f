"""Synthetic images with known ground truth.

* :mod:`.page` -- a page renderer (every line and word box known): the bundled example page and test pages.
* :mod:`.documents` -- documents of several kinds (receipts, invoices, letters, fill-in forms) with questions about
  them and their answer boxes, written as a data set in the ``queries.jsonl`` format that ``foveate eval`` and
  ``foveate train`` read (``foveate synth OUT -n 300``).  They teach the answer ranker what kind of answer a
  question asks for and where such answers sit, across layouts, rather than one data set's form layout.
"""

from .documents import KINDS, make_dataset
from .page import Page, TextLine, invoice_page, render_page

__all__ = ["KINDS", "Page", "TextLine", "invoice_page", "make_dataset", "render_page"]
