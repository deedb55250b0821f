"""``foveate eval-video`` reads its ``queries.jsonl`` as ``foveate eval`` does: a malformed line is a problem of that
line and the run goes on (it was a bare ``json.loads`` per line: a KeyError or JSONDecodeError traceback)."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest
from rich.console import Console

from foveate.core.errors import DatasetError
from foveate.eval.video import eval_boxes


def _frames(root, n=3):
    (root / "f").mkdir(parents=True)
    lines = []
    for i in range(n):
        img = np.full((96, 128, 3), 40, np.uint8)
        cv2.rectangle(img, (20 + 4 * i, 30), (60 + 4 * i, 70), (250, 250, 250), -1)
        cv2.imwrite(str(root / "f" / f"{i}.png"), img)
        lines.append(
            {
                "image": f"f/{i}.png",
                "query": "box",
                "boxes": [[20 + 4 * i, 30, 60 + 4 * i, 70]],
                "sequence": "s",
                "frame_index": i,
            }
        )
    return lines


def test_bad_lines_are_skipped_and_the_run_goes_on(tmp_path):
    lines = [json.dumps(x) for x in _frames(tmp_path)]
    lines += ["{not json", json.dumps({"image": "f/0.png", "query": "q", "boxes": [[0, 0, 5, 5]]}), "[" * 10_000]
    (tmp_path / "queries.jsonl").write_text("\n".join(lines) + "\n")
    console = Console(record=True, width=200)
    result = eval_boxes(tmp_path, budget=16, preset="fast", device="cpu", console=console)
    text = console.export_text()
    assert text.count("skipped: line") == 3 and "sequence" in text
    assert result


def test_no_usable_line_is_one_dataset_error(tmp_path):
    (tmp_path / "queries.jsonl").write_text("{}\n")
    with pytest.raises(DatasetError, match="no usable video line"):
        eval_boxes(tmp_path, budget=16, preset="fast", device="cpu", console=Console(record=True))
