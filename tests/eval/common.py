"""Small generated evaluation sets (rendered forms with known boxes, plus every kind of broken line)."""

from __future__ import annotations

import json
from pathlib import Path

from PIL import Image

from foveate.core.config import EncodeConfig
from foveate.synth import TextLine, render_page

FAST = EncodeConfig(preset="fast")


FIELDS = [
    ("Invoice No", "NW-2026-0417"),
    ("Date", "March 14, 2026"),
    ("Total due", "$1,234.50"),
    ("Account", "4410 2291 0087"),
    ("Signed", "J. Alvarez"),
]


def make_eval_set(root: Path, bad_lines: bool = True) -> dict:
    """Two rendered forms (fields at known boxes) plus, optionally, every kind of broken line."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "images").mkdir(exist_ok=True)
    lines = []
    for k, (w, h) in enumerate([(480, 360), (400, 520)]):
        text = [TextLine(f"{key}:", 20, 30 + 60 * i, 16) for i, (key, _) in enumerate(FIELDS)]
        text += [TextLine(val, 200, 30 + 60 * i, 16 + 2 * k) for i, (_, val) in enumerate(FIELDS)]
        page = render_page(text, width=w, height=h, noise=2.0, seed=k)
        Image.fromarray(page.image).save(root / "images" / f"form{k}.png")
        for key, val in FIELDS:
            ln = page.find(val)
            lines.append(
                {
                    "image": f"images/form{k}.png",
                    "query": f'What is the value of the field "{key}"?',
                    "boxes": [ln["box"]],
                    "text_heights": [ln["box"][3] - ln["box"][1]],
                    "answer_text": [val],
                    "type": "key_value",
                    "page": k,
                }
            )
    raw = [json.dumps(d) for d in lines]
    expected = {}
    if bad_lines:
        (root / "images" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n not really")
        extra = [
            ("json", '{"image": "images/form0.png", "query": "x", "boxes": [[1, 2, 3'),
            ("schema", json.dumps({"image": "images/form0.png", "boxes": [[0, 0, 10, 10]]})),
            ("schema", json.dumps({"image": "images/form0.png", "query": "q", "boxes": [[0, 0, 10]]})),
            (
                "schema",
                json.dumps(
                    {"image": "images/form0.png", "query": "q", "boxes": [[0, 0, 10, 10]], "text_heights": [1, 2]}
                ),
            ),
            ("image_missing", json.dumps({"image": "images/nope.png", "query": "q", "boxes": [[0, 0, 10, 10]]})),
            ("image_unreadable", json.dumps({"image": "images/broken.png", "query": "q", "boxes": [[0, 0, 9, 9]]})),
            ("no_boxes", json.dumps({"image": "images/form0.png", "query": "q", "boxes": [[900, 900, 950, 950]]})),
            (
                "box_clipped",
                json.dumps({"image": "images/form1.png", "query": "signature", "boxes": [[300, 480, 450, 560]]}),
            ),
            (
                "box_invalid",
                json.dumps(
                    {"image": "images/form1.png", "query": "total", "boxes": [[50, 50, 40, 60], [10, 10, 100, 40]]}
                ),
            ),
        ]
        for kind, text in extra:
            raw.append(text)
            expected[len(raw)] = kind
        raw.insert(3, "")  # blank lines are ignored, and line numbers still count them
        expected = {(n + 1 if n > 3 else n): k for n, k in expected.items()}
    (root / "queries.jsonl").write_text("\n".join(raw) + "\n")
    return {"n_valid": len(lines), "expected": expected}
