"""The video evaluation's function on tiny generated sequences (the figures come from the real command)."""

from __future__ import annotations

import json
import os

import cv2

from ..video.common import smooth_scene


def test_eval_boxes_compares_incremental_with_scratch_on_generated_sequences(tmp_path):
    from rich.console import Console

    from foveate.eval.video import eval_boxes

    lines = []
    for seq, step in (("left", 8), ("right", -8)):
        (tmp_path / seq).mkdir()
        for i, f in enumerate(smooth_scene(4, step) if step > 0 else smooth_scene(4, 8)[::-1]):
            cv2.imwrite(str(tmp_path / seq / f"{i}.png"), cv2.cvtColor(f, cv2.COLOR_RGB2BGR))
            x = 32 + 8 * (i if step > 0 else 3 - i)
            lines.append(
                {
                    "image": f"{seq}/{i}.png",
                    "boxes": [[x, 96, x + 64, 160]],
                    "sequence": seq,
                    "frame_index": i,
                    "query": "the object",
                }
            )
    (tmp_path / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in lines))
    res = eval_boxes(
        tmp_path,
        budget=20,
        approximate=(8.0,),
        console=Console(file=open(os.devnull, "w")),
        json_path=tmp_path / "r.json",
    )
    rows = {(r["protocol"], r["sequence"], r["session"]): r for r in res["rows"]}
    assert len(rows) == 3 * 3 * 2  # protocols x (2 sequences + all) x (incremental, approx t=8)
    assert rows[("prev-box", "all", "incremental")]["frames"] == 8
    assert all(0 <= r["coverage"] <= 1 and 0 < r["reencoded_share"] <= 1 for r in res["rows"])
    assert json.loads((tmp_path / "r.json").read_text())["rows"]
