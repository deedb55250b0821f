"""The multi-page evaluation set: its rule (every kept question about one page) on tiny hand-made pages, and the
generated born-digital pages (a real PDF with a text layer, read back by PDFium where the layout put every item)."""

from __future__ import annotations

import random

import pytest

from foveate.document.load import load_document
from foveate.eval.docset import BILLS, SetPage, about_one_page, draw_document, norm, quoted
from foveate.synth.pdf import pdf_document


def _q(text, **meta):
    return (text, {"key": "x", **meta})


FORM_A = SetPage(
    "a",
    "form",
    frozenset({"date", "fax", "remarks"}),
    (_q('What is the value of the field "DATE:"?', key_text="DATE:"), _q('Find the heading "Remarks"')),
)
FORM_B = SetPage("b", "form", frozenset({"date received", "phone"}), (_q("What is the PHONE?", key_text="PHONE"),))
RECEIPT = SetPage("r", "receipt", frozenset(), (_q("How much tax was charged?"), _q("What is the date?")))
RECEIPT_2 = SetPage("r2", "receipt", frozenset(), (_q("How much tax was charged?"),))
INVOICE = SetPage("i", "invoice", frozenset({"invoice"}), (_q("What is the total?"),))


def test_norm_and_quoted():
    assert norm("  DATE: ") == "date" and norm("P.O. Box 12") == "p o box 12"
    assert quoted("What is the x?", {"key_text": "Date:"}) == "date"
    assert quoted('Find the heading "Fax Cover Sheet"', {}) == "fax cover sheet"
    assert quoted("How much tax was charged?", {}) is None


def test_a_quote_printed_on_another_page_is_not_about_one_page():
    # "date" is printed within FORM_B's line "date received": the question fits both pages
    assert about_one_page([FORM_A, FORM_B], 0) == [1]
    # alone with a receipt, whose text is not annotated, the label names its page
    assert about_one_page([FORM_A, RECEIPT], 0) == [0, 1]
    assert about_one_page([FORM_A, FORM_B], 1) == [0]


def test_a_quote_another_page_asks_about_is_not_about_one_page():
    other = SetPage("c", "form", frozenset(), (_q("What is the phone?", key_text="Phone"),))
    assert about_one_page([FORM_B, other], 0) == [] and about_one_page([FORM_B, other], 1) == []


def test_unquoted_questions_only_on_the_only_bill_and_only_about_the_purchase():
    assert about_one_page([FORM_A, RECEIPT], 1) == [0]  # "What is the date?" fits the form's date too
    assert about_one_page([RECEIPT, RECEIPT_2], 0) == [] == about_one_page([RECEIPT, RECEIPT_2], 1)
    assert about_one_page([INVOICE, RECEIPT], 0) == []  # a total on each bill
    assert about_one_page([FORM_B, INVOICE], 1) == [0]


def test_every_drawn_document_keeps_only_questions_no_other_page_shares():
    rng = random.Random(3)
    forms = [FORM_A, FORM_B] + [
        SetPage(f"f{i}", "form", frozenset({f"label {i}", "date"}), (_q("x", key_text=f"Label {i}"),)) for i in range(6)
    ]
    letters = [SetPage("l", "letter", frozenset({"dear sir"}), (_q("Who signed it?"),))]
    pools = {"form": forms, "letter": letters, "bill": [RECEIPT, RECEIPT_2, INVOICE]}
    for _ in range(50):
        comp = rng.choice(["forms", "expense"])
        pages = draw_document(rng, pools, rng.randint(2, 9), comp)
        assert len({p.name for p in pages}) == len(pages)
        bills = sum(p.kind in BILLS for p in pages)
        assert bills == (1 if comp == "expense" else 0)
        for t, page in enumerate(pages):
            for k in about_one_page(pages, t):
                text, meta = page.questions[k]
                q = quoted(text, meta)
                others = [p for i, p in enumerate(pages) if i != t]
                if q is None:  # an unquoted question: on the only bill
                    assert page.kind in BILLS and bills == 1
                else:  # no other page prints or asks about the quoted text
                    assert not any(f" {q} " in f" {x} " for p in others for x in p.texts)
                    assert q not in {quoted(*pq) for p in others for pq in p.questions}
    with pytest.raises(ValueError, match="composition"):
        draw_document(rng, pools, 3, "letters")


@pytest.mark.parametrize("kind", ["form", "receipt"])
def test_a_generated_page_is_a_pdf_whose_text_layer_is_where_the_layout_put_it(kind):
    data, doc, questions = pdf_document(kind, 11)
    assert data.startswith(b"%PDF-") and questions
    assert pdf_document(kind, 11)[0] == data  # a function of its seed
    page = load_document(data).pages[0]  # 144 dpi: the layout's own pixel grid
    assert page.image.shape[:2] == (doc.height, doc.width)
    assert page.lines is not None  # born-digital: read from the text layer, no OCR
    for it in doc.items:
        line = min(page.lines, key=lambda ln: sum(abs(a - b) for a, b in zip(ln.box, it.box)))
        assert it.text in line.text or line.text in it.text
        x0, y0, x1, y1 = line.box  # the text layer's boxes are loose: down to the font's descent below the ink
        assert max(abs(x0 - it.box[0]), abs(y0 - it.box[1]), abs(x1 - it.box[2])) <= 4, (it.text, it.box, line.box)
        assert it.box[3] - 4 <= y1 <= it.box[3] + 0.5 * it.size, (it.text, it.box, line.box)
    for q in questions:  # every answer box lies on the page
        for x0, y0, x1, y1 in q["boxes"]:
            assert 0 <= x0 < x1 <= doc.width and 0 <= y0 < y1 <= doc.height


def test_page_profile_and_the_shipped_matrix(tmp_path):
    import numpy as np

    from foveate.document.pagescore import MATRIX_COLUMNS, PROFILE_DIM, page_profile, profile_matrix, use_profile_file

    lines = ["TOTAL 12.50", "Thank you", "Cash RM 20,00", "Table:"]
    prof = page_profile(lines, (1200, 400))  # a strip three times as tall as wide
    want = [0.5, 0.5, np.log(4) / 5, np.mean([11, 9, 13, 6]) / 40, 0.25, 0.25, np.log(3.0), 1.0]
    assert np.allclose(prof, want)
    assert page_profile(lines)[6] == 0.0  # no page size: not known to be tall
    assert page_profile(lines, (100, 1000))[6] == -1.0  # clipped
    assert np.array_equal(page_profile([]), np.zeros(PROFILE_DIM))
    a = profile_matrix()  # shipped with the package (scripts/fit_page_profile.py)
    assert a is not None and a.shape == (384, len(MATRIX_COLUMNS)) and np.isfinite(a).all()
    try:  # a matrix for another profile is left out, not misread
        np.save(tmp_path / "old.npy", np.zeros((384, 5), np.float32))
        use_profile_file(tmp_path / "old.npy")
        assert profile_matrix() is None
    finally:
        use_profile_file()
    assert profile_matrix() is not None
