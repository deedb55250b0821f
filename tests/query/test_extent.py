"""The answer-extent model: candidate pairs and features against slow, obvious references; its two inference paths;
what the text term paints with it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from foveate.query.text.extent import COLUMNS, RELATIONS, AnswerExtent, candidate_pairs, hulls, pair_features
from foveate.query.text.features import CONTENT_COLUMNS
from foveate.query.text.layout import layout_neighbours


def _layout(seed: int, n: int = 40):
    """Random rows of text lines: several lines per row, rows close enough that 'below' chains form."""
    rng = np.random.default_rng(seed)
    boxes = []
    for r in range(n // 4):
        y = 20 + r * rng.uniform(14, 30)
        x = rng.uniform(0, 80)
        for _ in range(4):
            w, h = rng.uniform(30, 160), rng.uniform(9, 16)
            boxes.append([x, y, x + w, y + h])
            x += w + rng.uniform(5, 60)
    return np.array(boxes)


def _slow_pairs(right, below):
    n = len(right)
    left, above = [-1] * n, [-1] * n
    for i in range(n):
        if right[i] >= 0 and left[right[i]] < 0:
            left[right[i]] = i
        if below[i] >= 0 and above[below[i]] < 0:
            above[below[i]] = i
    out = []
    for i in range(n):
        cands = []
        j = right[i]
        if j >= 0:
            cands.append((j, 0))
            if right[j] >= 0 and right[j] != i:
                cands.append((right[j], 1))
        j, rel = below[i], 2
        while j >= 0 and rel <= 4 and j != i:
            cands.append((j, rel))
            j, rel = below[j], rel + 1
        if left[i] >= 0:
            cands.append((left[i], 5))
        if above[i] >= 0:
            cands.append((above[i], 6))
        seen = set()
        for j, rel in cands:
            if j != i and j not in seen:
                seen.add(j)
                out.append((i, j, rel))
    return np.array(out, np.int64).reshape(-1, 3)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_candidate_pairs_against_loops(seed):
    boxes = _layout(seed)
    right, below, _ = layout_neighbours(boxes, 1000)
    got = candidate_pairs(right, below)
    want = _slow_pairs(right.tolist(), below.tolist())
    assert len(want) > len(boxes)  # the layout has neighbours to find
    np.testing.assert_array_equal(got, want)


def test_candidate_pairs_of_no_lines_and_of_lone_lines():
    assert candidate_pairs(np.zeros(0, np.int64), np.zeros(0, np.int64)).shape == (0, 3)
    assert candidate_pairs(np.array([-1, -1]), np.array([-1, -1])).shape == (0, 3)


def _slow_row(b, i, j, rel, content, lex, cos):
    x0, y0, x1, y1 = b[i]
    a0, c0, a1, c1 = b[j]
    h, hj = max(y1 - y0, 1.0), max(c1 - c0, 1.0)
    onehot = [1.0 if k == rel else 0.0 for k in range(len(RELATIONS))]
    name = RELATIONS[rel]
    gx = (a0 - x1) / h if name.startswith("right") else (x0 - a1) / h if name == "left" else 0.0
    gy = (c0 - y1) / h if name.startswith("below") else (y0 - c1) / h if name == "above" else 0.0
    overlap = (min(x1, a1) - max(x0, a0)) / max(min(x1 - x0, a1 - a0), 1.0)
    geometry = [
        min(max(gx, -2), 20) / 5,
        min(max(gy, -2), 10) / 3,
        np.log(hj / h),
        abs(a0 - x0) / h / 5,
        min(max(overlap, -5), 1),
    ]
    return onehot + geometry + [lex[j], cos[j], lex[i], cos[i]] + list(content[j]) + list(content[i])


@pytest.mark.parametrize("seed", [0, 1])
def test_pair_features_against_a_loop(seed):
    rng = np.random.default_rng(seed)
    boxes = _layout(seed)
    right, below, _ = layout_neighbours(boxes, 1000)
    pairs = candidate_pairs(right, below)
    content = rng.uniform(0, 1, (len(boxes), len(CONTENT_COLUMNS))).astype(np.float32)
    lex, cos = rng.uniform(0, 1, len(boxes)), rng.uniform(-0.2, 0.8, len(boxes))
    got = pair_features(boxes, content, pairs, lex, cos)
    want = np.array([_slow_row(boxes, i, j, r, content, lex, cos) for i, j, r in pairs], np.float32)
    assert got.shape == (len(pairs), len(COLUMNS))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    h = hulls(boxes, pairs)
    for (i, j, _), hb in zip(pairs, h):
        assert hb[0] <= min(boxes[i][0], boxes[j][0]) and hb[2] >= max(boxes[i][2], boxes[j][2])
        assert hb[1] <= min(boxes[i][1], boxes[j][1]) and hb[3] >= max(boxes[i][3], boxes[j][3])


def test_numpy_inference_equals_torch_and_other_columns_are_refused():
    torch.manual_seed(0)
    m = AnswerExtent()
    with torch.no_grad():
        m.linear.weight.normal_()
        m.linear.bias.fill_(-1.0)
        m.mean.normal_()
        m.scale.uniform_(0.5, 2.0)
    rows = np.random.default_rng(0).normal(size=(50, len(COLUMNS))).astype(np.float32)
    want = torch.sigmoid(m(torch.from_numpy(rows))).detach().numpy()
    np.testing.assert_allclose(m.probabilities(rows), want, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="columns"):
        AnswerExtent(columns=COLUMNS[:-1])


def _sure_extent(q: float) -> AnswerExtent:
    """A model that says every neighbour continues the answer with probability ``q``."""
    m = AnswerExtent()
    with torch.no_grad():
        m.linear.bias.fill_(float(np.log(q / (1 - q))))
    return m.eval()


def test_the_text_term_paints_the_hull_of_a_line_and_its_neighbours(page_texture):
    from foveate.query.query import Query
    from foveate.query.text.layout import text_index
    from foveate.query.text.term import answer_boxes, answer_probabilities, text_query_map
    from foveate.weights import load_weights

    w = load_weights("default")
    if w.text.ranker is None:
        pytest.skip("the package ships no trained ranker")
    index = text_index(page_texture)
    question = "How much is due in total?"
    p = answer_probabilities(index, question, w.text.ranker)
    boxes, probs, heights = answer_boxes(index, question, w.text.ranker, None)
    np.testing.assert_array_equal(boxes, index.boxes)  # without a model: the lines alone
    np.testing.assert_array_equal(probs, p)

    extent = _sure_extent(0.9)
    boxes, probs, heights = answer_boxes(index, question, w.text.ranker, extent)
    n = len(index.lines)
    assert len(boxes) > n and len(probs) == len(boxes) == len(heights)
    np.testing.assert_array_equal(probs[:n], p)
    top = int(np.argmax(p))
    assert probs[n:].max() == pytest.approx(0.9 * float(p[top]))  # the top line's hulls, at p * q
    assert (probs[n:] <= float(p.max()) + 1e-12).all()

    plain = w.replace(text_extent=None)
    grown = w.replace(text_extent=extent)
    q = Query(text=question)
    base = text_query_map(page_texture, q, plain).map
    more = text_query_map(page_texture, q, grown).map
    assert (more >= base - 1e-6).all() and (more > base + 1e-3).any()  # only adds: the hulls' blank between lines
    none = text_query_map(page_texture, q, w.replace(text_extent=_sure_extent(1e-9))).map
    np.testing.assert_allclose(none, base, atol=1e-6)  # improbable hulls paint nothing above the lines


def test_the_likely_lines_carry_the_hulls_for_selection(page_texture):
    """What the text term hands selection (``LikelyLines``): the lines with the ranker's probabilities and, with an
    extent model, the hulls it paints, at the same probabilities, their print the smaller line's times
    ``text.height``; ``regions`` is the two together.  Without an extent model: no hulls."""
    from foveate.query.query import Query
    from foveate.query.text.layout import text_index
    from foveate.query.text.term import answer_boxes, text_query_map
    from foveate.weights import load_weights

    w = load_weights("default")
    if w.text.ranker is None:
        pytest.skip("the package ships no trained ranker")
    index = text_index(page_texture)
    question = "How much is due in total?"
    extent = _sure_extent(0.9)
    grown = w.replace(text_extent=extent)
    lines = text_query_map(page_texture, Query(text=question), grown).lines
    boxes, probs, heights = answer_boxes(index, question, w.text.ranker, extent)
    n = len(index.lines)
    np.testing.assert_array_equal(lines.hulls, boxes[n:])
    np.testing.assert_array_equal(lines.hull_probs, probs[n:])
    np.testing.assert_allclose(lines.hull_heights, heights[n:] * w.text.height)
    rb, rh, rp = lines.regions
    np.testing.assert_array_equal(rb, np.concatenate([lines.boxes, lines.hulls]))
    np.testing.assert_array_equal(rp, np.concatenate([lines.probs, lines.hull_probs]))
    assert len(rh) == len(rb) > n
    bare = text_query_map(page_texture, Query(text=question), w.replace(text_extent=None)).lines
    assert bare.hulls.shape == (0, 4) and not len(bare.hull_probs)
    assert all(np.array_equal(a, b) for a, b in zip(bare.regions, (bare.boxes, bare.heights, bare.probs)))


def test_explain_lists_the_hulls_after_the_lines(page_texture):
    from foveate.query.query import Query
    from foveate.query.text.term import text_evidence
    from foveate.weights import load_weights

    w = load_weights("default")
    if w.text.ranker is None:
        pytest.skip("the package ships no trained ranker")
    q = Query(text="How much is due in total?")
    plain = text_evidence(page_texture, q, w.replace(text_extent=None))
    assert plain and {e["relation"] for e in plain} == {"answer"}
    grown = text_evidence(page_texture, q, w.replace(text_extent=_sure_extent(0.9)))
    assert grown[: len(plain)] == plain
    hulls = grown[len(plain) :]
    assert 1 <= len(hulls) <= 3 and all(e["relation"] == "answer extent" for e in hulls)
    top = plain[0]  # the most probable line: its hulls come first (every q is 0.9), then the next line's
    assert [e["probability"] for e in hulls] == sorted((e["probability"] for e in hulls), reverse=True)
    first = [e for e in hulls if e["probability"] == pytest.approx(0.9 * top["probability"], rel=1e-3)]
    assert first and first == hulls[: len(first)]
    for e in first:
        assert e["text"].startswith(top["text"] + " | ")
        x0, y0, x1, y1 = e["box"]  # the hull holds the top line
        assert x0 <= top["box"][0] and y0 <= top["box"][1] and x1 >= top["box"][2] and y1 >= top["box"][3]
