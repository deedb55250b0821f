"""The answer ranker's features (against slow, obvious references) and its two inference paths."""

from __future__ import annotations

import multiprocessing

import numpy as np
import pytest
import torch

from foveate.query.text.features import (
    COLUMNS,
    RELATION_COLUMNS,
    content_features,
    layout_features,
    money_value,
    relation_features,
    same_row,
)
from foveate.query.text.ranker import AnswerRanker


def test_content_features_recognise_kinds_of_answer():
    names = ("money", "date", "time", "phone", "ends_colon", "currency", "numeric_only", "percent", "web")
    from foveate.query.text.features import CONTENT_COLUMNS

    def flags(text):
        row = dict(zip(CONTENT_COLUMNS, content_features(text)))
        return {k for k in names if row[k] > 0.5}

    assert flags("TOTAL $1,234.50") == {"money", "currency"}
    assert flags("12/03/2019") == {"date", "numeric_only"}
    assert "date" in flags("March 14, 2026") and "date" in flags("14 Mar 2026")
    assert flags("15:58:19") == {"time", "numeric_only"}
    assert "phone" in flags("Tel: (503) 555-0148") and "phone" not in flags("12/03/2019")
    assert flags("Invoice No:") == {"ends_colon"}
    assert flags("VAT 20 %") == {"percent"}
    assert flags("billing@northwind.example") == {"web"}


@pytest.mark.parametrize(
    "text,value",
    [
        ("$1,234.50", 1234.5),
        ("Total 12,50", 12.5),
        ("RM 3.00 and 7.25", 7.25),
        ("1.234,56", 1234.56),
        ("no amount", None),
        ("12/03/2019", None),
    ],
)
def test_money_value(text, value):
    assert money_value(text) == value


def _slow_same_row(boxes):
    n = len(boxes)
    out = np.zeros((n, n), bool)
    for i in range(n):
        for j in range(n):
            hi, hj = max(boxes[i][3] - boxes[i][1], 1), max(boxes[j][3] - boxes[j][1], 1)
            overlap = min(boxes[i][3], boxes[j][3]) - max(boxes[i][1], boxes[j][1])
            out[i, j] = overlap >= 0.5 * min(hi, hj)
    return out


def _page(seed=0, n=12):
    rng = np.random.default_rng(seed)
    x0 = rng.uniform(0, 600, n)
    y0 = rng.uniform(0, 800, n)
    h = rng.uniform(8, 30, n)
    return np.stack([x0, y0, x0 + rng.uniform(20, 200, n), y0 + h], 1)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_same_row_and_nearest_left_against_loops(seed):
    boxes = _page(seed)
    np.testing.assert_array_equal(same_row(boxes), _slow_same_row(boxes))
    lex = np.random.default_rng(seed).uniform(0, 1, len(boxes)).astype(np.float32)
    cos = np.zeros(len(boxes), np.float32)
    rel = relation_features(boxes, lex, cos)
    col = {c: i for i, c in enumerate(RELATION_COLUMNS)}
    row = _slow_same_row(boxes)
    for i in range(len(boxes)):
        h = max(boxes[i][3] - boxes[i][1], 1)
        left = [j for j in range(len(boxes)) if j != i and row[i, j] and boxes[j][2] <= boxes[i][0] + 0.3 * h]
        want = lex[min(left, key=lambda j: boxes[i][0] - boxes[j][2])] if left else 0.0
        assert rel[i, col["left_lex"]] == pytest.approx(want)
        assert rel[i, col["row_lex"]] == pytest.approx(max([lex[j] for j in left], default=0.0))
    assert rel[:, col["is_best"]].argmax() == int(np.argmax(lex))


def test_layout_features_ranks_amounts_and_marks_the_last_one():
    boxes = np.array([[10, 10, 100, 30], [10, 50, 100, 70], [200, 50, 260, 70], [200, 90, 260, 110]], float)
    texts = ["STORE", "Subtotal", "9.50", "12.00"]
    f = layout_features(boxes, texts, (200, 300))
    from foveate.query.text.features import LAYOUT_COLUMNS

    c = {k: i for i, k in enumerate(LAYOUT_COLUMNS)}
    assert f[:, c["last_money"]].tolist() == [0, 0, 0, 1]
    assert f[3, c["money_rank"]] > f[2, c["money_rank"]] > 0 and f[0, c["money_rank"]] == 0
    assert f[0, c["y_rank"]] == 0 and f[3, c["y_rank"]] == 1
    assert f[2, c["rightmost"]] == 1 and f[1, c["rightmost"]] == 0


def test_numpy_inference_equals_torch_forward():
    torch.manual_seed(0)
    kinds = np.random.default_rng(0).normal(size=(10, 384)).astype(np.float32)
    ranker = AnswerRanker(kind_embeddings=kinds)
    with torch.no_grad():
        for p in ranker.parameters():
            p.normal_(0, 0.3)
    rows = np.random.default_rng(1).normal(size=(17, len(COLUMNS))).astype(np.float32)
    ranker.set_standardisation(rows)
    eq = np.random.default_rng(2).normal(size=384).astype(np.float32)
    ranker.eval()
    with torch.no_grad():
        want = ranker(torch.from_numpy(rows), torch.from_numpy(eq)).numpy()
    np.testing.assert_allclose(ranker.logits(rows, eq), want, rtol=1e-4, atol=1e-4)
    # a changed parameter is seen by the NumPy path after load_state_dict
    state = {k: v.clone() for k, v in ranker.state_dict().items()}
    state["linear.bias"] += 1.0
    ranker.load_state_dict(state)
    got = ranker.logits(rows, eq)
    np.testing.assert_allclose(got[:-1], want[:-1] + 1.0, rtol=1e-4, atol=1e-4)  # the lines' logits
    assert got[-1] == pytest.approx(float(want[-1]), abs=1e-4)  # the no-line option does not read the lines' bias


def _ranker_and_logits(seed: int) -> tuple[AnswerRanker, np.ndarray]:
    ranker = _random_ranker(seed, np.random.default_rng(seed).normal(size=(10, 384)).astype(np.float32))
    rows = np.random.default_rng(1).normal(size=(17, len(COLUMNS))).astype(np.float32)
    ranker.set_standardisation(rows)
    return ranker, ranker.logits(rows, np.ones(384, np.float32))  # the NumPy copy is made before it travels


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="the OS does not fork")
def test_a_ranker_sent_back_from_a_worker_reads_its_own_weights():
    """``foveate train`` fits its rankers in forked workers: a ranker that comes back reads the numbers it had
    there.  (Pickling moved the tensors to shared memory, freeing the storage its cached NumPy copy viewed: the
    parent's logits came out NaN or huge, and the ranker's validation top-1 read 8.8 % instead of 83 %.)"""
    from foveate.core.fork import fork_map

    rows = np.random.default_rng(1).normal(size=(17, len(COLUMNS))).astype(np.float32)
    for ranker, there in fork_map(_ranker_and_logits, [(0,), (1,)], workers=2):
        assert np.isfinite(there).all()
        np.testing.assert_array_equal(ranker.logits(rows, np.ones(384, np.float32)), there)


def test_probabilities_on_a_real_page(page_texture):
    from foveate.query.text import text_index
    from foveate.weights import load_weights

    w = load_weights("default")
    if w.text.ranker is None:
        pytest.skip("the package ships no trained ranker")
    index = text_index(page_texture)
    p = w.text.ranker.probabilities(index, "How much is due in total?")
    assert p.shape == (len(index.lines),) and 0.0 < float(p.sum()) <= 1.0 + 1e-6 and (p >= 0).all()
    best = index.lines[int(np.argmax(p))].text
    assert "1,234.50" in best  # the total due on the bundled invoice
    np.testing.assert_array_equal(p, w.text.ranker.probabilities(index, "How much is due in total?"))  # deterministic


def test_two_rankers_on_one_texture_do_not_share_cached_features(page_texture):
    """The per-page feature cache and the per-question probabilities are keyed by what they depend on: two rankers
    with the same answer kinds but other kind embeddings (and freed one after the other) read their own numbers."""
    from foveate.query.text.layout import text_index
    from foveate.query.text.term import answer_probabilities

    index = text_index(page_texture)
    q = "What is the total due?"
    got = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        kinds = np.random.default_rng(seed).normal(size=(10, 384)).astype(np.float32)
        ranker = AnswerRanker(kind_embeddings=kinds).eval()
        got.append(answer_probabilities(index, q, ranker).copy())
        fresh = AnswerRanker(kind_embeddings=kinds).eval()
        fresh.load_state_dict(ranker.state_dict())
        index.cache.clear()
        np.testing.assert_allclose(got[-1], fresh.probabilities(index, q), rtol=1e-5, atol=1e-7)
        del ranker, fresh
    assert not np.allclose(got[0], got[1])


def _random_ranker(seed: int, kinds: np.ndarray) -> AnswerRanker:
    torch.manual_seed(seed)
    r = AnswerRanker(kind_embeddings=kinds)
    with torch.no_grad():
        for p in r.parameters():
            p.normal_(0, 0.3)
    return r.eval()


def test_ensemble_averages_its_members_probabilities(page_texture):
    from foveate.query.text.layout import text_index
    from foveate.query.text.ranker import RankerEnsemble

    kinds = np.random.default_rng(0).normal(size=(10, 384)).astype(np.float32)
    members = [_random_ranker(s, kinds) for s in (0, 1, 2)]
    ens = RankerEnsemble(members).eval()
    index = text_index(page_texture)
    q = "Who issued the invoice?"
    rows, eq = members[0].features(index, q)
    with torch.no_grad():  # the reference: each member's torch softmax over lines and the no-line option
        soft = [torch.softmax(m(torch.tensor(rows), torch.tensor(eq)), 0).numpy() for m in members]
    want = np.mean(soft, 0)
    np.testing.assert_allclose(ens.probabilities(index, q), want[:-1], rtol=1e-4, atol=1e-6)
    e = np.exp(ens.logits(rows, eq))
    np.testing.assert_allclose(e / e.sum(), want, rtol=1e-4, atol=1e-6)  # a softmax of its logits is the mean
    one = RankerEnsemble(members[:1])
    np.testing.assert_allclose(one.probabilities(index, q), members[0].probabilities(index, q), rtol=1e-5, atol=1e-7)
    assert ens.config()["members"] == 3
    with pytest.raises(ValueError):
        RankerEnsemble([])
    other = AnswerRanker(kind_embeddings=kinds, hidden=16)
    with pytest.raises(ValueError, match="different features"):
        RankerEnsemble([members[0], other])


@pytest.mark.parametrize("question", ["What is the total due?", "Who issued the invoice?", "INVOICE NO", "zzzz"])
def test_handset_features_are_what_the_handset_rule_paints(page_texture, question):
    """The ranker's hand-set columns against the hand-set map's own record of what it painted on which line
    (``LineMatch.painted``, filled by :func:`relevance_map`): per line, the match value and the most it received
    to the right of a match (or continuing it) and below one."""
    from foveate.query.text.handset import handset_features, relevance_map
    from foveate.query.text.layout import text_index
    from foveate.query.text.match import match_lines, question_scores

    index = text_index(page_texture)
    m = match_lines(index, question)
    relevance_map(index, m)
    want = np.zeros((len(index.lines), 3), np.float32)
    for j, rel, v in m.painted:
        c = {"match": 0, "right": 1, "value continued": 1, "below": 2}[rel]
        want[j, c] = max(want[j, c], v)
    got = handset_features(index, *question_scores(index, question))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    assert (got[:, 0] > 0).any() == bool(m.painted)


def test_a_ranker_reads_its_own_columns_by_name(page_texture):
    """A ranker trained on fewer feature columns (a file from before a column was added) reads those columns out
    of the full rows, in its order; a column this foveate does not compute is refused."""
    from foveate.query.text.features import HANDSET_COLUMNS
    from foveate.query.text.layout import text_index

    kinds = np.random.default_rng(0).normal(size=(10, 384)).astype(np.float32)
    index = text_index(page_texture)
    full, _ = _random_ranker(0, kinds).features(index, "What is the total due?")
    assert full.shape[1] == len(COLUMNS)
    cols = tuple(reversed([c for c in COLUMNS if c not in HANDSET_COLUMNS]))
    part, _ = AnswerRanker(columns=cols, kind_embeddings=kinds).features(index, "What is the total due?")
    np.testing.assert_array_equal(part, full[:, [COLUMNS.index(c) for c in cols]])
    with pytest.raises(ValueError, match="does not compute"):
        AnswerRanker(columns=COLUMNS + ("no such column",), kind_embeddings=kinds)
