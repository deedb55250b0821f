"""``foveate bench --folder``: per-image encode of a folder with gated and full-page OCR, and the line recall."""

from __future__ import annotations

import json

import numpy as np
from PIL import Image

from foveate.bench.corpus import bench_corpus, line_recall, match_lines
from foveate.synth import TextLine, render_page

from ..cli.common import run


def test_match_lines_counts_found_and_read_the_same():
    ref = [
        {"text": "Total", "box": [0, 0, 100, 20]},
        {"text": "Date", "box": [0, 40, 100, 60]},
        {"text": "Name", "box": [0, 80, 100, 100]},
    ]
    got = [{"text": "Total", "box": [2, 0, 100, 21]}, {"text": "Dale", "box": [0, 41, 99, 60]}]
    assert match_lines(ref, got) == [(True, True), (True, False), (False, False)]


def test_line_recall_counts_and_lists_what_the_gate_missed(tmp_path):
    page = [
        {"text": "Total", "box": [0, 0, 100, 20], "score": 0.99},
        {"text": "$310", "box": [120, 0, 180, 20], "score": 0.97},
    ]
    photo = [{"text": "UX", "box": [50, 50, 70, 62], "score": 0.59}]
    images = [(str(tmp_path / "page.png"), page, page[:1]), (str(tmp_path / "photo.jpg"), photo, [])]
    answers = {str((tmp_path / "page.png").resolve()): [[110, 0, 190, 22]]}
    r = line_recall(images, answers)
    assert (r["lines"], r["found"], r["read_same"]) == (3, 1, 1)
    assert (r["answer_lines"], r["answer_found"], r["answer_read_same"]) == (1, 0, 0)
    assert r["missed"] == [
        {"image": images[0][0], "text": "$310", "box": [120, 0, 180, 20], "score": 0.97, "answer": True},
        {"image": images[1][0], "text": "UX", "box": [50, 50, 70, 62], "score": 0.59, "answer": False},
    ]


def test_bench_folder_times_both_modes_and_measures_recall(tmp_path):
    imgs = tmp_path / "set" / "images"
    imgs.mkdir(parents=True)
    page = render_page(
        [TextLine("Invoice No: 4471", 30, 30, 20), TextLine("Total due: $310.00", 30, 80, 20)], width=360, height=140
    )
    Image.fromarray(np.full((120, 160, 3), 128, np.uint8)).save(imgs / "a_warmup.png")
    Image.fromarray(page.image).save(imgs / "b_page.png")
    Image.fromarray(np.full((240, 320, 3), 200, np.uint8)).save(imgs / "c_blank.png")
    box = page.find("Total due")["box"]
    (tmp_path / "set" / "queries.jsonl").write_text(
        json.dumps({"image": "images/b_page.png", "query": "total?", "boxes": [box]}) + "\n"
    )
    res = bench_corpus(tmp_path / "set", json_path=tmp_path / "r.json")
    assert res["images"] == 2 and json.loads((tmp_path / "r.json").read_text())["images"] == 2  # warm-up not timed
    auto, always = res["summary"]["auto"], res["summary"]["always"]
    assert auto["lines"] == always["lines"] == 2 and auto["detector"] == {"none": 1, "full": 1, "page": 1}
    assert auto["encode_ms_no_text"]["n"] == 1 and always["encode_ms_no_text"]["n"] == 1
    assert res["recall"] == {
        "lines": 2,
        "found": 2,
        "read_same": 2,
        "answer_lines": 1,
        "answer_found": 1,
        "answer_read_same": 1,
        "missed": [],
    }


def test_bench_folder_cli_rejects_bad_options(tmp_path):
    r = run("bench", "--folder", tmp_path, "--ocr", "sometimes")
    assert r.returncode == 2 and "--ocr" in r.stderr
    r = run("bench", "--folder", tmp_path / "missing")
    assert r.returncode == 2 and "not a folder" in r.stderr
