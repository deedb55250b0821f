"""Text relevance with the real models: rapidocr reads pages we render (their word boxes are known), MiniLM
embeds lines and queries, and the text query term steers the selection.  One OCR run per rendered page
(session fixtures; ``foveate.query.text`` caches OCR per image)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import foveate
from foveate.core.errors import UnsupportedInputError
from foveate.eval.metrics import query_metrics
from foveate.query import text as T
from foveate.synth import TextLine, render_page


def _inside(inner, outer, slack=4) -> bool:
    return (
        inner[0] >= outer[0] - slack
        and inner[1] >= outer[1] - slack
        and inner[2] <= outer[2] + slack
        and inner[3] <= outer[3] + slack
    )


def _legible(sel, box, height=None) -> float:
    m = query_metrics(sel.boxes, sel.levels, [box], sel.image_size, text_heights=[height] if height else None)
    return m.legible_coverage


@pytest.fixture(scope="session")
def page_ocr(page, page_texture):
    # page_texture (the default preset) ran the OCR; ocr_lines returns the cached result for the same pixels
    return T.ocr_lines(page.image)


@pytest.fixture(scope="session")
def form():
    """A second layout: a form whose date sits under a "Signed:" label, with unrelated fields around."""
    L = TextLine
    return render_page(
        [
            L("SERVICE AGREEMENT", 60, 50, 30),
            L("Client:", 60, 130, 16),
            L("Harbor Freight Logistics", 200, 130, 16),
            L("Amount:", 60, 160, 16),
            L("$12,400.00", 200, 160, 16),
            L("Term:", 60, 190, 16),
            L("twelve months from delivery", 200, 190, 16),
            L("The contractor delivers the services described in schedule A. Either party may end this", 60, 320, 13),
            L("agreement with thirty days of written notice. Disputes go to arbitration in Portland.", 60, 338, 13),
            L("Signed:", 60, 600, 16),
            L("M. Okafor, Director", 200, 600, 16),
            L("Date:", 60, 630, 16),
            L("2 June 2025", 200, 630, 16),
        ],
        width=700,
        height=760,
    )


@pytest.fixture(scope="session")
def form_texture(form):
    return foveate.encode(form.image, device="cpu")


# -- OCR -------------------------------------------------------------------------------------------------


def test_ocr_finds_the_rendered_words(page, page_ocr):
    words = [w for ln in page_ocr for w in ln.words]
    assert len(page_ocr) >= 30 and all(0.0 <= ln.score <= 1.0 for ln in page_ocr)
    found = 0
    for w in page.words:
        want = T.normalize_text(w["text"])
        if any(T.normalize_text(o.text) == want and _inside(o.box, w["box"], 6) for o in words):
            found += 1
    # every word of the page at 13 px and above, and the 10 px small print, in the right place
    assert found / len(page.words) >= 0.9, found / len(page.words)
    for label in ("Total due", "Signature date: 15 March 2026", "Invoice No: NW-2026-0417"):
        truth = page.find(label)["box"]
        assert any(ln.text == label and _inside(ln.box, truth, 6) for ln in page_ocr), label


SHORT_FIELDS = ("mm", "Tax:", "12.50", "(01)", "N/A", "Qty 2", "17:53", "No.", "7.04", "Total:", "kg", "1")


def test_short_lines_are_read_as_printed():
    """Short fields are most of a form's and a receipt's lines, and the recogniser pads them (to
    ``REC_MIN_WIDTH``, not the model's 320): each one, alone on its row, still reads as printed, in its place."""
    from foveate.channels.text.ocr import REC_MIN_WIDTH, ocr_engine

    fields = [TextLine(t, 60 + 260 * (i % 2), 40 + 50 * (i // 2), 16) for i, t in enumerate(SHORT_FIELDS)]
    doc = render_page(fields, width=560, height=360)
    lines = T.read_text(doc.image)
    assert ocr_engine()._load_rec_model().rec_image_shape[2] == REC_MIN_WIDTH
    for t in SHORT_FIELDS:
        truth = next(ln for ln in doc.lines if ln["text"] == t)["box"]
        read = [ln.text for ln in lines if _inside(ln.box, truth, 8)]
        assert read == [t], (t, read)


def test_read_text_rejects_bad_input_and_handles_tiny_or_blank_images():
    for bad in (
        np.zeros((20, 20), np.uint8),
        np.zeros((20, 20, 4), np.uint8),
        np.zeros((20, 20, 3), np.float32),
        "page.png",
    ):
        with pytest.raises(UnsupportedInputError):
            T.read_text(bad)
    assert T.read_text(np.zeros((4, 4, 3), np.uint8)) == []
    assert T.read_text(np.full((200, 300, 3), 255, np.uint8)) == []


def test_text_is_stored_with_the_texture_and_survives_save_load(page_texture, page_ocr, tmp_path):
    tex = page_texture
    assert tex.groups["text"][1] - tex.groups["text"][0] == 2 and "text" not in tex.absent
    assert [ln["text"] for ln in tex.extras["text"]["lines"]] == [ln.text for ln in page_ocr]
    emb = tex.tensors["text_embeddings"].float().numpy()
    assert emb.shape == (len(page_ocr), T.EMBED_DIM)
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=2e-3)
    # the stored line embeddings are MiniLM's (float16 storage)
    np.testing.assert_allclose(emb[:3], T.embed_texts([ln.text for ln in page_ocr[:3]]), atol=2e-3)
    loaded = foveate.Texture.load(tex.save(tmp_path / "page.fvt"))
    a = foveate.select(tex, "What is the total due?", cut=False)
    b = foveate.select(loaded, "What is the total due?", cut=False)
    np.testing.assert_array_equal(a.boxes, b.boxes)


def test_text_channels_follow_the_ocr_boxes(page_texture, page_ocr):
    mask, dens = page_texture.channel("text"), page_texture.channel("text_density")
    ref = np.zeros_like(mask)
    p = page_texture.patch_size
    for ln in page_ocr:  # independent slow reference: fraction of each tile inside the line boxes
        x0, y0, x1, y1 = ln.box
        for r in range(y0 // p, (y1 - 1) // p + 1):
            for c in range(x0 // p, (x1 - 1) // p + 1):
                oy = min(y1, (r + 1) * p) - max(y0, r * p)
                ox = min(x1, (c + 1) * p) - max(x0, c * p)
                ref[r, c] += oy * ox / (p * p)
    np.testing.assert_allclose(mask, np.minimum(ref, 1.0), atol=2e-3)  # float16 storage
    assert ((dens > 0) == (ref > 0)).all()
    small = page_ocr[-1]  # the 10 px small print needs more detail than the 34 px title
    title = next(ln for ln in page_ocr if ln.text == "NORTHWIND OPTICS")
    assert dens[small.box[1] // p, small.box[0] // p + 2] > dens[title.box[1] // p + 1, title.box[0] // p + 2]


# -- the text query term ------------------------------------------------------------------------------------


def test_paraphrase_lifts_the_date_region(page, page_texture, form, form_texture):
    blind = foveate.select(page_texture, None, cut=False)
    sel = foveate.select(page_texture, "when was it signed", cut=False, explain=True)
    date = page.find("Signature date")["box"]
    assert _legible(sel, date) >= 0.95 > _legible(blind, date)
    assert any(e["text"].startswith("Signature date") for e in sel.evidence)
    # a plain "Date:" label under "Signed:": the meaning finds "Signed:", the layout carries it to the date
    sel = foveate.select(form_texture, "when was it signed", cut=False)
    blind = foveate.select(form_texture, None, cut=False)
    value = form.find("2 June 2025")["box"]
    assert _legible(sel, value) >= 0.95 > _legible(blind, value)


def test_the_value_of_a_field_sits_right_of_its_label(form, form_texture):
    sel = foveate.select(
        form_texture, 'What is the value of the field "Amount"?', cut=False, explain=True, weights="handset"
    )  # the hand-set label matcher: match, then the value to its right
    assert _legible(sel, form.find("$12,400.00")["box"]) >= 0.95
    relations = {e["text"]: e["relation"] for e in sel.evidence}
    assert relations.get("Amount:") == "match" and relations.get("$12,400.00") == "right"


def test_the_learned_ranker_puts_the_answer_first(form, form_texture):
    sel = foveate.select(form_texture, 'What is the value of the field "Amount"?', cut=False, explain=True)
    assert _legible(sel, form.find("$12,400.00")["box"]) >= 0.95
    top = sel.evidence[0]
    assert top["text"] == "$12,400.00" and top["relation"] == "answer" and top["probability"] > 0.5
    assert [e["probability"] for e in sel.evidence] == sorted((e["probability"] for e in sel.evidence), reverse=True)


def test_evidence_follows_the_weights_in_use(form, form_texture):
    q = 'What is the value of the field "Amount"?'
    learned = foveate.select(form_texture, q, cut=False, explain=True)
    handset = foveate.select(form_texture, q, cut=False, explain=True, weights="handset")  # same texture, after
    assert {e["relation"] for e in learned.evidence} == {"answer"}
    assert "answer" not in {e["relation"] for e in handset.evidence}
    assert {e["text"]: e["relation"] for e in handset.evidence}.get("Amount:") == "match"


def _total_due(page):
    """The value on the "Total due" row (the subtotal prints the same amount higher up)."""
    label = page.find("Total due")["box"]
    return next(x["box"] for x in page.lines if x["text"] == "$1,234.50" and abs(x["box"][1] - label[1]) < 10)


@pytest.mark.parametrize("weights", ["default", "handset"])
@pytest.mark.parametrize("budget", [144, 273])
def test_two_questions_select_different_tiles(page, page_texture, weights, budget):
    a = foveate.select(page_texture, "What is the total due?", budget, cut=False, weights=weights)
    b = foveate.select(page_texture, "when was it signed", budget, cut=False, weights=weights)
    fine = lambda s: {tuple(x) for x, lv in zip(s.boxes.tolist(), s.levels) if lv == 0}  # noqa: E731
    fa, fb = fine(a), fine(b)
    if budget == 144 or weights == "handset":
        # at 273 tokens the learned top-k completes each answer, then spends the rest on the page's print, which the
        # two questions share (54 % of the sharp tiles on this page): the answers below are what differs
        assert len(fa & fb) / len(fa | fb) < 0.5
    assert _legible(a, _total_due(page)) >= 0.95  # the answer
    if weights == "handset":  # the label matcher also keeps the label it matched
        assert _legible(a, page.find("Total due")["box"]) >= 0.95
    assert _legible(b, page.find("Signature date")["box"]) >= 0.95
    assert _legible(a, page.find("Signature date")["box"]) < 0.95
    assert _legible(b, _total_due(page)) < 0.95


def test_an_unsure_ranker_says_so(page_texture):
    # a question about what the picture shows: the answer is written on no line (the ranker's no-line option)
    sel = foveate.select(page_texture, "Is there a dog in this picture?", cut=False)
    assert any("no OCR line looks like the answer" in n for n in sel.notes)
    sure = foveate.select(page_texture, "What is the total due?", cut=False)
    assert not any("no OCR line" in n for n in sure.notes)


def test_no_match_falls_back_to_the_query_blind_selection(page_texture):
    blind = foveate.select(page_texture, None, cut=False, weights="handset")
    sel = foveate.select(page_texture, "xylophone quarantine zeppelin", cut=False, weights="handset")
    assert any("falls back" in n for n in sel.notes)
    np.testing.assert_array_equal(sel.boxes, blind.boxes)
    np.testing.assert_array_equal(sel.levels, blind.levels)


def test_text_and_point_prompt_in_one_query(page, page_texture):
    logo = page.find("NORTHWIND OPTICS")["box"]
    pt = ((logo[0] + logo[2]) / 2, (logo[1] + logo[3]) / 2)
    sel = foveate.select(page_texture, {"text": "What is the total due?", "points": [pt]}, cut=False, explain=True)
    assert {"query:text", "query:prompt"} <= set(sel.explain)
    assert _legible(sel, _total_due(page)) >= 0.95
    lm = sel.level_map()
    assert lm[int(pt[1]) // 16, int(pt[0]) // 16] == 0


@pytest.mark.parametrize(
    "query",
    [
        "",
        "   ",
        "x" * 10_000,
        "What is the total due? " * 450,
        "请问总金额是多少？",
        "Когда подписан договор?",
        "ما هو المبلغ الإجمالي",
        "💰💰💰?",
        "🧾 total due",
    ],
)
def test_bad_or_odd_queries_give_a_selection(page_texture, query):
    sel = foveate.select(page_texture, query, cut=False)
    assert 0 < len(sel) <= 273
    if not query.strip():
        # no note about the query (the uniform floor may still say it chose the whole image)
        assert sel.query.text is None and not [n for n in sel.notes if not n.startswith("uniform floor")]
    if len(query) > foveate.query.query.MAX_QUERY_CHARS:
        assert any("truncated" in n for n in sel.notes)
    if query == "🧾 total due":
        assert not any("falls back" in n for n in sel.notes)


def test_a_page_without_text(photo_texture):
    assert photo_texture.extras["text"]["lines"] == [] and "text" not in photo_texture.absent
    sel = foveate.select(photo_texture, "what does the sign say?", cut=False)
    assert any("no text was found" in n for n in sel.notes)
    assert float(photo_texture.channel("text").max()) == 0.0


def test_a_texture_without_the_text_group_says_the_text_is_unused(photo):
    tex = foveate.encode(photo, preset="fast", device="cpu")
    sel = foveate.select(tex, "where is the helmet?", cut=False)
    assert any("not used" in n for n in sel.notes)


def test_query_embedding_is_computed_once_per_text():
    T._embed_query_cached.cache_clear()
    a = T.embed_query("how much is due?")
    b = T.embed_query("how much is due?")
    assert a is b and T._embed_query_cached.cache_info().misses == 1
    np.testing.assert_allclose(a, T.embed_texts(["how much is due?"])[0], atol=1e-5)


# -- pure helpers against independent references -------------------------------------------------------------


def _levenshtein_indel(a: str, b: str) -> float:
    """Normalised Indel similarity by a plain LCS table (the reference for rapidfuzz's)."""
    t = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(len(a)):
        for j in range(len(b)):
            t[i + 1][j + 1] = t[i][j] + 1 if a[i] == b[j] else max(t[i][j + 1], t[i + 1][j])
    return 2 * t[-1][-1] / (len(a) + len(b)) if a or b else 1.0


def test_token_similarity_rules():
    q = ["total", "no", "signature", "to"]
    w = ["total", "t0tal", "n0", "signatur", "sigmature", "to1", "xyz", "tota"]
    sim = T.token_similarity(q, w)
    assert sim[0, 0] == 1.0 and sim[0, 1] == pytest.approx(0.9)  # folded OCR confusion 0/o
    assert sim[1, 2] == pytest.approx(0.9)
    assert sim[2, 3] == pytest.approx(0.9 * _levenshtein_indel("5i9nature", "5i9natur"))
    assert sim[2, 4] == pytest.approx(0.9 * _levenshtein_indel("5i9nature", "5i9mature"))
    assert sim[3, 5] == pytest.approx(0.9)  # "TO:" read as "TO1"
    assert sim[0, 6] == 0.0 and sim[3, 6] == 0.0
    assert sim[0, 7] == pytest.approx(0.9 * _levenshtein_indel("t0ta1", "t0ta"))


def test_query_parsing():
    qt = T.QueryText.parse('What is the value of the field "Date of Birth"?')
    assert qt.tokens == ("date", "of", "birth") and qt.phrases == ("dateofbirth",) and qt.quoted
    qt = T.QueryText.parse("When was the contract signed?")
    assert qt.tokens == ("contract", "signed") and not qt.quoted
    assert T.tokenize("Größe: 12 cm 总金额") == ["grosse", "12", "cm", "总", "金", "额"]


def test_layout_neighbours_on_a_drawn_form():
    boxes = np.array(
        [
            [10, 10, 60, 22],  # 0 label "Name:"
            [80, 11, 200, 23],  # 1 its value, right
            [220, 10, 260, 22],  # 2 next cell on the row
            [10, 40, 80, 52],  # 3 label "Address:" below 0
            [10, 60, 200, 72],  # 4 value below 3, left-aligned: continues 3's block
            [10, 78, 200, 90],  # 5 next line of the same block
            [400, 300, 450, 312],  # 6 far away
        ]
    )
    right, below, cont = T.layout_neighbours(boxes, width=500)
    assert right.tolist()[:3] == [1, 2, -1] and right[6] == -1
    assert below[0] == 3 and below[3] == 4 and below[4] == 5 and below[6] == -1
    assert cont[3] == 4 and cont[4] == 5 and cont[0] == -1  # 40 - 22 = 18 px: a gap, not the same block


@pytest.mark.parametrize("touch", [True, False])
@pytest.mark.parametrize("fill", [0.0, 0.25, 1.0])
def test_paint_boxes_against_a_loop(fill, touch):
    """Every tile a box touches holds its value (the maximum where boxes overlap); with a fill, a tile the box covers a
    fraction f of holds v * (1 - fill * (1 - f)); without ``touch``, v * f.  The slow way, tile by tile, with boxes
    that leave the grid, boxes on tile edges and boxes of no area."""
    rng = np.random.default_rng(0)
    xy = rng.uniform(-20, 110, (16, 2))
    boxes = np.concatenate([xy, xy + rng.uniform(1, 40, (16, 2))], 1)  # x0, y0, x1, y1
    boxes[12] = [24, 36, 48, 60]  # on tile edges
    boxes[13, 3] = boxes[13, 1]  # no height
    boxes[14] = [-30, -30, -5, -5]  # outside
    vals = rng.uniform(0, 1, 16)
    got = T.paint_boxes((9, 10), 12, boxes, vals, touch=touch, fill=fill)
    ref = np.zeros((9, 10))
    for (x0, y0, x1, y1), v in zip(boxes, vals):
        for r in range(9):
            for c in range(10):
                ix = min(x1, c * 12 + 12) - max(x0, c * 12)
                iy = min(y1, r * 12 + 12) - max(y0, r * 12)
                if ix > 0 and iy > 0:
                    f = ix * iy / 144
                    ref[r, c] = max(ref[r, c], v * (1 - fill * (1 - f)) if touch else v * f)
    np.testing.assert_allclose(got, ref, atol=1e-6)
    assert np.array_equal(got > 0, T.paint_boxes((9, 10), 12, boxes, vals, touch=touch) > 0)  # the same tiles
    assert not T.paint_boxes((9, 10), 12, np.zeros((0, 4)), []).any()
    with pytest.raises(ValueError, match="2 boxes but 1 values"):
        T.paint_boxes((9, 10), 12, boxes[:2], vals[:1])


def test_answer_map_fill_ranks_the_parent_holding_the_line_first():
    """A line whose grown box reaches 4 px into the next 32 px block: without a fill both blocks' maxima are equal
    (the quadtree's query value is max-pooled), with one the block holding the line's core is higher."""
    from foveate.core import ops
    from foveate.query.text.term import answer_map

    index = SimpleNamespace(grid=(8, 8), patch=16, boxes=np.array([[20.0, 14.0, 100.0, 30.0]]))  # y 10..34 grown
    probs = np.array([0.9])
    for fill, expect_equal in ((0.0, True), (0.25, False)):
        m = answer_map(index, probs, 10.0, 0.25, fill)
        _, maxes, _ = ops.build_mips(m[..., None], np.ones((8, 8), np.float32), 2)
        core, graze = float(maxes[1][0, 1, 0]), float(maxes[1][1, 1, 0])  # rows 0-31 vs 32-63, columns 32-63
        assert graze > 0
        assert (core == pytest.approx(graze)) if expect_equal else core > graze
