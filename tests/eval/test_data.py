"""Reading ``queries.jsonl``: parsing, box checks, every broken line reported with its number."""

from __future__ import annotations

import json

import pytest

from foveate.core.errors import DatasetError
from foveate.eval.data import check_boxes, parse_query_line, read_queries
from foveate.eval.report import render_markdown


def test_parse_query_line():
    q = parse_query_line(
        json.dumps(
            {
                "image": "a.png",
                "query": "q",
                "boxes": [[1, 2, 3, 4], [5, 6, 7, 8]],
                "answer_text": ["x", "y"],
                "extra": 1,
            }
        ),
        7,
    )
    assert q.line == 7 and q.boxes.shape == (2, 4) and q.meta == {"extra": 1}
    assert q.answers == [("x", (1, 2, 3, 4)), ("y", (5, 6, 7, 8))]
    q = parse_query_line(
        json.dumps({"image": "a.png", "query": "q", "boxes": [[1, 2, 3, 4], [5, 6, 7, 8]], "answer_text": "both"}), 1
    )
    assert q.answers == [("both", None)]  # not one per box: read at any box
    for bad in [
        "[1, 2]",
        '{"image": 3, "query": "q", "boxes": [[0,0,1,1]]}',
        '{"image": "a", "query": "q", "boxes": []}',
        '{"image": "a", "query": "q", "boxes": [[0, 0, "1", 1]]}',
        '{"image": "a", "query": "q", "boxes": [[0,0,1,1]], "answer_text": [1]}',
        '{"image": "a", "query": "q", "boxes": [[0, 0, NaN, 1]]}',
    ]:
        with pytest.raises(Exception) as exc:
            parse_query_line(bad, 1)
        assert exc.value.kind in ("json", "schema")


def test_check_boxes_clips_and_drops():
    q = parse_query_line(
        json.dumps(
            {
                "image": "a.png",
                "query": "q",
                "boxes": [[-5, 10, 20, 30], [50, 50, 40, 60], [200, 200, 300, 300], [10, 10, 20, 20]],
                "text_heights": [1, 2, 3, 4],
            }
        ),
        3,
    )
    cq, probs = check_boxes(q, (100, 100))
    assert [p.kind for p in probs] == ["box_clipped", "box_invalid", "box_outside"]
    assert all(p.line == 3 and not p.skipped for p in probs)
    assert cq.boxes.tolist() == [[0, 10, 20, 30], [10, 10, 20, 20]] and cq.text_heights.tolist() == [1, 4]
    cq, probs = check_boxes(
        parse_query_line('{"image": "a", "query": "q", "boxes": [[200, 0, 300, 10]]}', 9), (100, 100)
    )
    assert cq is None and probs[-1].kind == "no_boxes" and probs[-1].skipped


def test_every_broken_line_is_reported_with_its_number_and_the_run_goes_on(eval_set, result):
    root, info = eval_set
    got = {}
    for p in result.problems:
        got.setdefault(p.line, set()).add(p.kind)
    for line, kind in info["expected"].items():
        assert kind in got.get(line, set()), (line, kind, got)
    assert all(str(p).startswith(f"line {p.line}:") for p in result.problems)
    c = result.counts
    assert c["problem:json"] == 1 and c["problem:schema"] == 3 and c["problem:image_missing"] == 1
    assert c["problem:image_unreadable"] == 1 and c["problem:no_boxes"] == 1 and c["problem:box_outside"] == 1
    assert c["problem:box_clipped"] == 1 and c["problem:box_invalid"] == 1
    assert c["skipped_lines"] == 7
    # the valid queries, plus the clipped one and the one that kept a box, are evaluated at both budgets
    assert c["evaluated_queries"] == info["n_valid"] + 2
    assert c["records"] == 2 * c["evaluated_queries"]
    md = render_markdown(result)
    assert "7 of 19 lines skipped" in md


def test_missing_folder_or_file_is_a_dataset_error(tmp_path):
    with pytest.raises(DatasetError, match="not a folder"):
        read_queries(tmp_path / "nope")
    with pytest.raises(DatasetError, match="no queries.jsonl"):
        read_queries(tmp_path)


GOOD = {"image": "a.png", "query": "What is the total?", "boxes": [[1, 2, 30, 40]]}


def _write(folder, lines: list[str], prefix: bytes = b"") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "queries.jsonl").write_bytes(prefix + "\n".join(lines).encode("utf-8", "surrogatepass") + b"\n")


@pytest.mark.parametrize(
    "bad",
    [
        "[" * 100_000 + "]" * 100_000,  # a RecursionError in json.loads
        '{"image": "a.png", "query": "q", "boxes": [[0, 0, 10, ' + "9" * 5000 + "]]}",  # Python's int-string limit
        '{"image": "a.png", "query": "q", "boxes": [[0, 0, 10, ' + "9" * 4000 + "]]}",  # an int too large for a float
        '{"image": "a.png", "query": "q", "boxes": [[0, 0, 10, 10]], "text_heights": [' + "9" * 400 + "]}",
        '{"image": "a.png", "query": "q", "boxes": [[0, 0, 10, 10]], "meta": ' + "[" * 40 + "]" * 40 + "}",
        '{"image": "a.png", "query": "\\ud800 total", "boxes": [[0, 0, 10, 10]]}',  # not valid Unicode
        '{"image": "a.png", "query": "q", "boxes": [[0, 0, 10, 10]], "page": "\\udfff"}',
        '{"image": "a\\u0000.png", "query": "q", "boxes": [[0, 0, 10, 10]]}',  # no path holds a NUL
        '{"image": "/etc/passwd.png", "query": "q", "boxes": [[0, 0, 10, 10]]}',  # outside the data folder
        '{"image": "images/../../x.png", "query": "q", "boxes": [[0, 0, 10, 10]]}',
        '{"image": "C:\\\\x.png", "query": "q", "boxes": [[0, 0, 10, 10]]}',
    ],
    ids=[
        "deep",
        "digits",
        "overflow",
        "height-overflow",
        "deep-meta",
        "surrogate",
        "surrogate-meta",
        "nul",
        "absolute",
        "climbs-out",
        "drive",
    ],
)
def test_a_hostile_line_is_a_problem_of_that_line_and_the_rest_is_read(tmp_path, bad):
    _write(tmp_path, [json.dumps(GOOD), bad, json.dumps(GOOD)])
    queries, problems, n = read_queries(tmp_path)
    assert n == 3 and [q.line for q in queries] == [1, 3]
    assert [(p.line, p.skipped) for p in problems] == [(2, True)] and problems[0].kind in ("json", "schema")
    assert len(str(problems[0])) < 200  # a message, not the line


def test_a_byte_order_mark_does_not_cost_the_first_line(tmp_path):
    _write(tmp_path, [json.dumps(GOOD), json.dumps({**GOOD, "query": "Who?"})], prefix=b"\xef\xbb\xbf")
    queries, problems, n = read_queries(tmp_path)
    assert [q.text for q in queries] == ["What is the total?", "Who?"] and problems == [] and n == 2
