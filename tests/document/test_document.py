"""Documents: PDFs made with a real writer (reportlab), rendered and read with PDFium; multi-page TIFFs with Pillow.

References are independent of the code under test: where reportlab drew something (user space, points) against
where the ink is in the render, PDFium's own FPDF_PageToDevice against our page affine, the strings written against
the lines read back."""

from __future__ import annotations

import io
import time

import numpy as np
import pypdfium2 as pdfium
import pytest
from PIL import Image, ImageDraw, ImageFont
from reportlab.lib import pdfencrypt
from reportlab.lib.utils import ImageReader
from reportlab.pdfgen import canvas

import foveate
from foveate.core.errors import (
    DocumentDecodeError,
    DocumentEmptyError,
    DocumentEncryptedError,
    DocumentTooLongError,
    ImageTooLargeError,
    TextureFormatError,
    TextureKindError,
)
from foveate.document.load import document_kind, load_document
from foveate.document.select import allocate, page_scores, select_document
from foveate.document.textlayer import page_affine
from foveate.document.texture import DocumentTexture, encode_document

W_PT, H_PT = 612, 792
TEXT_ONLY = {"groups": ("text",)}


def _pdf(draw_pages, pagesize=(W_PT, H_PT), encrypt=None) -> bytes:
    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=pagesize, encrypt=encrypt)
    for draw in draw_pages:
        draw(c)
        c.showPage()
    c.save()
    return buf.getvalue()


def _text_page(lines):
    def draw(c):
        c.setFont("Helvetica", 12)
        for x, y, s in lines:
            c.drawString(x, y, s)

    return draw


def _picture_of_text(text: str) -> Image.Image:
    im = Image.new("RGB", (900, 200), "white")
    ImageDraw.Draw(im).text((40, 60), text, fill="black", font=ImageFont.load_default(size=64))
    return im


def _image_page(text: str):
    def draw(c):
        c.drawImage(ImageReader(_picture_of_text(text)), 36, 400, width=540, height=120)

    return draw


def _ink(img: np.ndarray, region=None) -> tuple[int, int, int, int]:
    """Bounding box (x0, y0, x1, y1) of the dark pixels of ``img`` (inside ``region`` when given)."""
    x0, y0, x1, y1 = region or (0, 0, img.shape[1], img.shape[0])
    ys, xs = np.nonzero(img[y0:y1, x0:x1].min(-1) < 128)
    return int(xs.min()) + x0, int(ys.min()) + y0, int(xs.max()) + 1 + x0, int(ys.max()) + 1 + y0


# -- input ---------------------------------------------------------------------------------------------------


def test_text_layer_gives_the_written_lines():
    data = _pdf([_text_page([(72, 700, "Invoice number: 12345"), (320, 700, "Date: 2024-05-01"), (72, 660, "Total")])])
    doc = load_document(data, dpi=72)
    (page,) = doc.pages
    assert page.text_source == "text-layer" and page.image.shape == (H_PT, W_PT, 3)
    assert [ln.text for ln in page.lines] == ["Invoice number: 12345", "Date: 2024-05-01", "Total"]
    assert [w.text for w in page.lines[0].words] == ["Invoice", "number:", "12345"]


@pytest.mark.parametrize("dpi", [72, 144])
def test_a_drawn_box_comes_back_at_its_place(dpi):
    s = dpi / 72

    def draw(c):
        c.rect(100, 150, 60, 40, stroke=0, fill=1)  # user space: x 100..160, y 150..190 (origin bottom-left)
        c.setFont("Helvetica", 14)
        c.drawString(300, 500, "Signature")

    page = load_document(_pdf([draw]), dpi=dpi).pages[0]
    expected = (100 * s, (H_PT - 190) * s, 160 * s, (H_PT - 150) * s)  # top-left origin, pixels
    ink = _ink(page.image, (0, int(expected[1]) - 20, int(250 * s), page.image.shape[0]))
    assert np.allclose(ink, expected, atol=1)
    (line,) = page.lines
    text_ink = _ink(page.image, (int(250 * s), 0, page.image.shape[1], int(expected[1]) - 20))
    bx0, by0, bx1, by1 = line.box
    assert bx0 <= text_ink[0] + 1 and by0 <= text_ink[1] and bx1 >= text_ink[2] - 1 and by1 >= text_ink[3]
    assert abs(bx0 - text_ink[0]) <= 2 * s and abs(bx1 - text_ink[2]) <= 2 * s  # the loose box hugs the word
    assert by1 - by0 <= 20 * s  # one 14 pt line, not the page


@pytest.mark.parametrize("rotation", [0, 90, 180, 270])
def test_page_affine_matches_pdfium_page_to_device(rotation):
    import ctypes

    import pypdfium2.raw as c

    def draw(cv):
        cv.setPageRotation(rotation)
        cv.drawString(50, 50, "x")

    pdf = pdfium.PdfDocument(_pdf([draw], pagesize=(400, 300)))
    page = pdf[0]
    w, h = (800, 600) if rotation in (0, 180) else (600, 800)
    a = page_affine(page.get_bbox(), page.get_rotation(), w, h)
    dx, dy = ctypes.c_int(), ctypes.c_int()
    for x, y in [(0, 0), (400, 300), (123.5, 77.25), (10, 290)]:
        assert c.FPDF_PageToDevice(page.raw, 0, 0, w, h, 0, x, y, dx, dy)
        ours = a @ np.array([x, y, 1.0])
        assert abs(ours[0] - dx.value) <= 1 and abs(ours[1] - dy.value) <= 1


def test_rotated_page_reads_upright_text_where_it_is_drawn():
    def draw(c):  # /Rotate 90, the content drawn turned so that it reads upright as displayed
        c.setPageRotation(90)
        c.saveState()
        c.translate(300, 100)
        c.rotate(90)
        c.setFont("Helvetica", 14)
        c.drawString(0, 0, "Quarterly revenue")
        c.restoreState()

    page = load_document(_pdf([draw]), dpi=72).pages[0]
    assert page.rotation == 90 and page.image.shape[:2] == (int(page.size_pt[1]), int(page.size_pt[0]))
    (line,) = page.lines
    assert line.text == "Quarterly revenue"
    ink = _ink(page.image)
    assert line.box[2] - line.box[0] > 3 * (line.box[3] - line.box[1])  # a horizontal line on the displayed page
    assert line.box[0] <= ink[0] + 1 and line.box[2] >= ink[2] - 1 and line.box[1] <= ink[1] and line.box[3] >= ink[3]


@pytest.mark.slow
def test_image_only_and_mixed_documents():
    data = _pdf([_text_page([(72, 700, "Born digital page")]), _image_page("SCANNED 4711")])
    doc = load_document(data, dpi=72)
    assert [p.text_source for p in doc.pages] == ["text-layer", "ocr"]
    assert doc.pages[1].lines is None
    tex = encode_document(data, dpi=72, device="cpu", **TEXT_ONLY)
    assert tex.text_sources == ["text-layer", "ocr"]
    assert tex.pages[0].extras["text"]["ocr"]["mode"] == "text-layer"
    ocr_text = " ".join(ln["text"] for ln in tex.pages[1].extras["text"]["lines"])  # real OCR of the picture
    assert "4711" in ocr_text and tex.pages[1].extras["text"]["ocr"]["mode"] != "text-layer"


def test_text_layer_off_ocrs_every_page():
    doc = load_document(_pdf([_text_page([(72, 700, "hello")])]), dpi=72, text_layer=False)
    assert doc.pages[0].lines is None


def test_multipage_tiff():
    frames = [_picture_of_text(f"page {i}") for i in range(3)]
    buf = io.BytesIO()
    frames[0].save(buf, format="TIFF", save_all=True, append_images=frames[1:])
    assert document_kind(buf.getvalue()) == "tiff"
    doc = load_document(buf.getvalue())
    assert doc.kind == "tiff" and len(doc.pages) == 3
    for p, f in zip(doc.pages, frames):
        assert np.array_equal(p.image, np.asarray(f)) and p.text_source == "ocr"
    one = io.BytesIO()
    frames[0].save(one, format="TIFF")
    assert document_kind(one.getvalue()) is None  # a single-page TIFF stays an image


# -- bad files -----------------------------------------------------------------------------------------------


def test_encrypted_pdf():
    data = _pdf([_text_page([(72, 700, "secret")])], encrypt=pdfencrypt.StandardEncryption("pw"))
    with pytest.raises(DocumentEncryptedError, match="password"):
        load_document(data)


@pytest.mark.parametrize(("cut", "says"), [(0.5, "breaks off"), (0.67, "page 3 cannot be decoded")])
def test_a_multipage_tiff_cut_short_is_refused_not_read_as_its_first_page(cut, says):
    """Pillow opens a TIFF whose later pages are cut off and reads its first page; its page count raises.  It was
    taken for a one-page image, the other pages lost without a word."""
    frames = [_picture_of_text(f"page {i}") for i in range(3)]
    buf = io.BytesIO()
    frames[0].save(buf, format="TIFF", save_all=True, append_images=frames[1:])
    data = buf.getvalue()[: int(len(buf.getvalue()) * cut)]
    assert document_kind(data) == "tiff"
    with pytest.raises(DocumentDecodeError, match=says):
        load_document(data)


@pytest.mark.parametrize("cut", [0.5, 0.1])
def test_corrupt_pdf(cut):
    data = _pdf([_text_page([(72, 700, "truncated")])])
    with pytest.raises(DocumentDecodeError):
        load_document(data[: int(len(data) * cut)])
    with pytest.raises(DocumentDecodeError):
        load_document(b"%PDF-1.7\n" + bytes(range(256)) * 4)


def test_zero_page_pdf():
    objs = ["<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /Kids [] /Count 0 >>"]
    out, offs = b"%PDF-1.4\n", []
    for i, o in enumerate(objs, 1):
        offs.append(len(out))
        out += f"{i} 0 obj\n{o}\nendobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objs) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offs)
    out += f"trailer\n<< /Size {len(objs) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    with pytest.raises(DocumentEmptyError):
        load_document(out)


def test_thousand_pages_refused_fast_by_the_cap():
    new = pdfium.PdfDocument.new()
    for _ in range(1000):
        new.new_page(W_PT, H_PT)
    buf = io.BytesIO()
    new.save(buf)
    t0 = time.perf_counter()
    with pytest.raises(DocumentTooLongError, match="1,000 pages"):
        load_document(buf.getvalue(), max_pages=50)
    assert time.perf_counter() - t0 < 2.0  # from the page count, nothing rendered


def test_poster_page_refused_before_rendering():
    data = _pdf([_text_page([(10, 10, "big")])], pagesize=(14_000, 14_000))
    with pytest.raises(ImageTooLargeError, match="dpi"):
        load_document(data, dpi=144)


def test_not_a_document(tmp_path):
    with pytest.raises(DocumentDecodeError):
        load_document(b"GIF89a not a pdf")
    p = tmp_path / "empty.pdf"
    p.write_bytes(b"")
    with pytest.raises(DocumentDecodeError, match="empty"):
        load_document(p)


# -- texture, selection, predictor ---------------------------------------------------------------------------

PAGES = [
    [(72, 700, "Meeting notes for the spring planning session"), (72, 680, "Attendees: Alice, Bob, Carol")],
    [(72, 700, "INVOICE"), (72, 660, "Invoice number: 12345"), (72, 640, "Total due: $ 1,234.00")],
    [(72, 700, "Appendix: shipping terms and conditions")],
]


@pytest.fixture(scope="module")
def doc_pdf(tmp_path_factory):
    p = tmp_path_factory.mktemp("doc") / "doc.pdf"
    p.write_bytes(_pdf([_text_page(ls) for ls in PAGES]))
    return p


@pytest.fixture(scope="module")
def doc_tex(doc_pdf):
    return foveate.encode(doc_pdf, dpi=72, device="cpu", **TEXT_ONLY)


def test_encode_returns_a_document_that_saves_as_one_file(doc_tex, tmp_path):
    assert isinstance(doc_tex, DocumentTexture) and doc_tex.num_pages == 3
    assert doc_tex.text_sources == ["text-layer"] * 3
    assert [ln["text"] for ln in doc_tex.pages[1].extras["text"]["lines"]][0] == "INVOICE"
    path = doc_tex.save(tmp_path / "doc.fvt")
    back = DocumentTexture.load(path)
    assert back.id == doc_tex.id and back.info() == doc_tex.info()
    for a, b in zip(back.pages, doc_tex.pages):
        assert np.array_equal(a.image, b.image) and a.extras == b.extras
    data = bytearray(path.read_bytes())
    data[-100:] = bytes(100)  # a page's pixels damaged
    with pytest.raises(TextureFormatError):
        DocumentTexture.from_bytes(bytes(data))


def test_one_store_entry_and_the_kinds_kept_apart(doc_tex, tmp_path):
    from foveate.core.texture import Texture
    from foveate.store import TextureStore, get_document, put_document

    with TextureStore(tmp_path / "store") as store:
        entry, created = put_document(store, doc_tex, source="doc.pdf")
        assert created and entry.id == doc_tex.id and len(store.entries()) == 1
        assert not put_document(store, doc_tex)[1]  # the same pages, the same entry
        back = get_document(store, doc_tex.id)
        assert back is not None and back.id == doc_tex.id and back.num_pages == 3
        with pytest.raises(TextureKindError):  # the store's get is for single textures, and keeps the entry
            store.get(doc_tex.id)
        assert doc_tex.id in store
        page_entry, _ = store.put(doc_tex.pages[0])
        with pytest.raises(TextureKindError):
            get_document(store, page_entry.id)
    path = doc_tex.save(tmp_path / "doc.fvt")
    with pytest.raises(TextureKindError, match="DocumentTexture.load"):
        Texture.load(path)
    with pytest.raises(TextureKindError, match="single texture"):
        DocumentTexture.from_bytes(doc_tex.pages[0].to_bytes())


def test_select_spends_one_budget_on_the_asked_page(doc_tex):
    sel = select_document(doc_tex, "What is the total due?", 64, weights="default")
    assert int(np.argmax(sel.relevance)) == 1
    assert 0 < len(sel) <= 64 and 1 in {i for i, _ in sel.pages}
    d = sel.to_dict()
    assert d["schema_version"] == 2 and len(d["pages"]) == 3
    assert d["pages"][0] == {"width": W_PT, "height": H_PT}
    assert all(0 <= t["page"] < 3 for t in d["tokens"]) and len(d["tokens"]) == len(sel)
    only = select_document(doc_tex, "anything", 64, page=2)
    assert {i for i, _ in only.pages} == {2} and only.page_share(2, level=int(only.token_levels.min())) == 1.0


def test_select_document_bad_input(doc_tex):
    with pytest.raises(foveate.QueryError):
        select_document(doc_tex, "x", 64, page=3)
    with pytest.raises(foveate.QueryError, match="page"):
        select_document(doc_tex, {"text": "x", "points": [[5, 5]], "point_labels": [1]}, 64)


def test_predictor_takes_a_pdf(doc_pdf):
    pred = foveate.FoveatePredictor(device="cpu", **TEXT_ONLY)
    out = pred.set_image(doc_pdf)
    assert isinstance(out, DocumentTexture) and pred.document is out and pred.is_image_set
    sel = pred.select("Who attended the meeting?", 48)
    assert sel.to_dict()["schema_version"] == 2
    pred.reset()
    assert not pred.is_image_set


def test_allocate_is_within_budget_and_favours_the_best():
    rel = np.array([0.1, 0.9, 0.6, 0.0])
    focus, gists = allocate(rel, 100, [4, 4, 4, 4], share=0.5, max_focus=3, gist=0)
    assert set(focus) == {1, 2} and sum(focus.values()) == 100 and focus[1] > focus[2] and not gists
    focus, gists = allocate(rel, 100, [4, 4, 4, 4], share=0.5, max_focus=3, gist=8)
    assert gists == {0: 8, 3: 8} and sum(focus.values()) + 16 == 100
    focus, _ = allocate(rel, 10, [4, 9, 9, 4], share=0.5, max_focus=3, gist=0)
    assert focus == {1: 10}  # page 2's part cannot hold its cover: the best page takes all


def test_page_scores_softmax_over_pages():
    feats = np.array([[np.log(0.9), 0.2, 0.5], [np.log(0.9), 0.8, 0.5], [np.log(0.01), 0.0, 0.1]])
    plain = page_scores(feats, 0.0, 0.0)
    assert np.isclose(plain.sum(), 1.0) and np.isclose(plain[0], plain[1]) and plain[2] < 0.01
    lexical = page_scores(feats, 2.0, 0.0)  # the page whose best line matches the question's words wins the tie
    assert np.isclose(lexical.sum(), 1.0) and lexical[1] > lexical[0] > lexical[2]
    with_theme = np.c_[feats, [0.6, 0.1, 0.0]]  # the theme column: what the page as a whole is about
    assert np.allclose(page_scores(with_theme, 0.0, 0.0, 0.0), plain)
    theme = page_scores(with_theme, 0.0, 0.0, 4.0)
    assert np.isclose(theme.sum(), 1.0) and theme[0] > theme[1] > theme[2]
    assert np.isclose(theme[0] / theme[1], np.exp(4.0 * 0.5))  # exp of the weighted difference: a softmax
    profiled = page_scores(np.c_[with_theme, [0.0, 0.0, 3.0]], 0.0, 0.0, 4.0)  # the profile term, weight 1
    assert np.isclose(profiled[2] / profiled[0], np.exp(np.log(0.01 / 0.9) + 3.0 - 4.0 * 0.6))


def test_image_entry_points_name_a_pdf_a_document():
    from foveate.core.errors import UnsupportedInputError
    from foveate.core.io import load_image

    data = _pdf([_text_page([(72, 700, "one page")])])
    with pytest.raises(UnsupportedInputError, match="a PDF is a document"):
        load_image(data)


def test_pdfs_read_from_several_threads_at_once_read_as_one_at_a_time():
    """PDFium is not thread-safe: concurrent loads (a server's uploads, the gateway's PDF parts) crashed the process
    before every use of it took one lock.  Eight threads loading the same document read what one thread reads."""
    from concurrent.futures import ThreadPoolExecutor

    data = _pdf([_text_page(ls) for ls in PAGES])
    ref = load_document(data)
    with ThreadPoolExecutor(8) as pool:
        docs = list(pool.map(lambda _: load_document(data), range(16)))
    for doc in docs:
        assert len(doc.pages) == len(ref.pages)
        for a, b in zip(doc.pages, ref.pages):
            assert np.array_equal(a.image, b.image) and a.lines == b.lines
