"""Property: whatever a ``queries.jsonl`` holds, the parser ``foveate eval`` and ``foveate train`` share
(:func:`foveate.eval.data.read_queries`, then :func:`~foveate.eval.data.check_boxes` against the image) turns every
non-blank line into a valid query or a recorded problem of that line -- never an exception."""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foveate.core.errors import DatasetError
from foveate.eval.data import PROBLEM_KINDS, QUERIES_FILE, EvalQuery, check_boxes, read_queries

KEYS = ("image", "query", "boxes", "text_heights", "answer_text")

# any character, lone surrogates included (a JSON "\ud800" escape, or raw in a file that is not valid UTF-8)
chars = st.characters(codec=None, exclude_categories=())
texts = st.text(chars, max_size=12)
numbers = st.one_of(
    st.integers(),
    st.integers(min_value=-(10**400), max_value=10**400),  # too large for a float
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 1e308, -1e308, 5e-324, 10**20]),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, texts)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(texts, inner, max_size=4)),
    max_leaves=12,
)
coords = st.one_of(st.floats(-2e3, 2e3), st.integers(-2000, 2000), numbers)
box = st.one_of(st.lists(coords, min_size=4, max_size=4), st.lists(coords, max_size=6), values)
good_image = st.sampled_from(["a.png", "images/b.jpg", "../c.png", "/abs/d.png", " e .png"])
field = {
    "image": st.one_of(good_image, values),
    "query": st.one_of(texts, values),
    "boxes": st.one_of(st.lists(box, min_size=1, max_size=4), values),
    "text_heights": st.one_of(st.lists(coords, max_size=4), values),
    "answer_text": st.one_of(texts, st.lists(texts, max_size=4), values),
}


@st.composite
def query_objects(draw) -> dict:
    """A query line's object: each key missing, well typed or anything at all, plus extra (metadata) keys."""
    obj = {k: draw(field[k]) for k in KEYS if draw(st.booleans()) or k in ("image", "query", "boxes")}
    for k in list(obj):
        if draw(st.integers(0, 5)) == 0:
            del obj[k]
    obj.update(draw(st.dictionaries(texts, values, max_size=2)))
    return obj


@st.composite
def near_valid_objects(draw) -> dict:
    """A well-formed query (boxes inside, across or outside an image of up to 600 x 600, or empty), now and then with
    one odd value: most of them must parse."""
    n = draw(st.integers(1, 3))
    coord = st.one_of(st.floats(-100, 700), st.integers(-100, 700))
    obj: dict = {
        "image": draw(good_image),
        "query": draw(st.one_of(st.text(max_size=12), texts)),
        "boxes": [draw(st.lists(coord, min_size=4, max_size=4)) for _ in range(n)],
    }
    if draw(st.booleans()):
        obj["text_heights"] = draw(st.lists(st.one_of(st.floats(0.5, 50), coords), min_size=n, max_size=n))
    if draw(st.booleans()):
        obj["answer_text"] = draw(st.one_of(st.text(max_size=8), st.lists(st.text(max_size=8), min_size=1, max_size=n)))
    obj.update(draw(st.dictionaries(st.text(max_size=6), values, max_size=2)))
    return obj


def _dumps(obj) -> str:
    try:
        return json.dumps(obj)  # NaN / Infinity written as the literals Python's json reads
    except (ValueError, RecursionError):
        return "null"


hostile = st.sampled_from(
    [
        "[" * 100_000 + "]" * 100_000,
        "{" * 50_000,
        '{"a": ' * 3000 + "1" + "}" * 3000,
        '{"image": "a.png", "query": "q", "boxes": [[0, 0, 10, ' + "9" * 5000 + "]]}",
        '{"image": "a.png", "query": "q", "boxes": [[0, 0, 10, 1' + "0" * 400 + "]]}",
        '{"image": "a.png", "query": "q", "boxes": [[0, 0, 10, 1e999]]}',
        '{"image": "a.png", "query": "q", "boxes": [[NaN, 0, Infinity, -Infinity]]}',
        '{"image": "a.png", "query": "q", "boxes": [[0, 0, 10, 10]], "text_heights": [NaN]}',
        '{"image": "a.png", "query": "q", "boxes": [[0, 0, 10, 10]], "m": NaN, "n": -Infinity}',
        '{"image": "a.png", "query": "\\ud800", "boxes": [[0, 0, 10, 10]]}',
        '{"image": "a\\u0000.png", "query": "q", "boxes": [[0, 0, 10, 10]]}',
        '{"image": "a.png", "query": "q", "boxes": [[0, 0, 10, 10]], "text_heights": [0]}',
        '{"image": "a.png", "query": "q", "boxes": [[true, false, 1, 1]]}',
        '{"image": "a.png", "query": "q", "boxes": [[0, 0, 10, 10]], "answer_text": [null]}',
        '{"image": "a.png", "query": "q", "boxes": [[-1e9, -1e9, 1e9, 1e9], [500, 500, 600, 600]]}',
        '{"image": "a.png", "query": "q", "boxes": [[0, 0, 10, 10]], "image": 3}',
        "\ufeff" + json.dumps({"image": "a.png", "query": "q", "boxes": [[0, 0, 10, 10]]}),
        "",
        "   \t",
        "null",
        "{}",
    ]
)
lines = st.one_of(
    near_valid_objects().map(_dumps),
    query_objects().map(_dumps),
    values.map(_dumps),
    texts,
    hostile,
    st.binary(max_size=20).map(lambda b: b.decode("latin-1")),  # written back as UTF-8 below; some bytes as-is
)


def _check_query(q: EvalQuery, raw_line: int) -> None:
    assert q.line == raw_line
    assert isinstance(q.image, str) and q.image.strip() and "\0" not in q.image
    assert isinstance(q.text, str)
    q.image.encode("utf-8")  # written to eval.json / eval.md as UTF-8
    q.text.encode("utf-8")
    assert q.boxes.dtype == np.float64 and q.boxes.ndim == 2 and q.boxes.shape[1] == 4 and len(q.boxes) >= 1
    assert np.isfinite(q.boxes).all()
    if q.text_heights is not None:
        assert q.text_heights.shape == (len(q.boxes),) and np.isfinite(q.text_heights).all()
        assert (q.text_heights > 0).all()
    for answer, where in q.answers:
        assert isinstance(answer, str)
        answer.encode("utf-8")
        assert where is None or (len(where) == 4 and all(math.isfinite(v) for v in where))
    json.dumps(q.meta).encode("utf-8")  # eval.json keeps the metadata
    json.dumps(q.meta, ensure_ascii=False).encode("utf-8")
    str(q.meta).encode("utf-8")  # --group-by tabulates str(value) into eval.md


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    body=st.lists(lines, max_size=6),
    bom=st.booleans(),
    crlf=st.booleans(),
    raw_bytes=st.booleans(),
    size=st.tuples(st.integers(1, 600), st.integers(1, 600)),
)
def test_every_line_is_a_valid_query_or_a_problem_of_that_line(body, bom, crlf, raw_bytes, size):
    # one line per entry: a line break inside an entry would make two
    body = [b.replace("\r", " ").replace("\n", " ") for b in body]
    text = ("\r\n" if crlf else "\n").join(body)
    data = text.encode("utf-8", "surrogatepass")  # a raw lone surrogate: bytes that are not valid UTF-8
    if raw_bytes:
        data = text.encode("latin-1", "replace")  # another encoding altogether
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / QUERIES_FILE).write_bytes((b"\xef\xbb\xbf" if bom else b"") + data)
        queries, problems, n = read_queries(tmp)
    by_line: dict[int, list[str]] = {}
    for p in problems:
        assert p.kind in PROBLEM_KINDS and p.skipped and isinstance(p.line, int)
        assert str(p).startswith(f"line {p.line}: ") and len(str(p)) < 300
        by_line.setdefault(p.line, []).append(p.kind)
    assert all(len(kinds) == 1 for kinds in by_line.values())  # one problem per broken line
    read = [q.line for q in queries]
    assert len(set(read)) == len(read) and not set(read) & set(by_line)
    assert n == len(read) + len(by_line)  # every non-blank line is one or the other
    assert all(1 <= i <= max(1, len(body)) for i in [*read, *by_line])
    for q in queries:
        _check_query(q, q.line)
        assert body[q.line - 1].strip()  # a blank line is neither
        checked, probs = check_boxes(q, size)  # against an image of any size: boxes outside it are problems
        assert all(p.kind in PROBLEM_KINDS and p.line == q.line for p in probs)
        if checked is None:
            assert probs and probs[-1].kind == "no_boxes" and probs[-1].skipped
        else:
            h, w = size
            b = checked.boxes
            assert len(b) >= 1 and np.isfinite(b).all()
            assert (b[:, 0] >= 0).all() and (b[:, 1] >= 0).all() and (b[:, 2] <= w).all() and (b[:, 3] <= h).all()
            assert (b[:, 2] > b[:, 0]).all() and (b[:, 3] > b[:, 1]).all()
            assert checked.text_heights is None or len(checked.text_heights) == len(b)


def test_an_empty_file_or_no_file_at_all(tmp_path):
    (tmp_path / QUERIES_FILE).write_bytes(b"")
    assert read_queries(tmp_path) == ([], [], 0)
    (tmp_path / QUERIES_FILE).write_bytes(b"\xef\xbb\xbf\n\n  \n")
    assert read_queries(tmp_path) == ([], [], 0)
    (tmp_path / QUERIES_FILE).unlink()
    with pytest.raises(DatasetError, match="no queries.jsonl"):
        read_queries(tmp_path)
    (tmp_path / QUERIES_FILE).mkdir()  # a folder of that name
    with pytest.raises(DatasetError, match="no queries.jsonl"):
        read_queries(tmp_path)
    with pytest.raises(DatasetError, match="not a folder"):
        read_queries(tmp_path / "nope")
