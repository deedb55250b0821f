"""The recogniser's padding: rapidocr's (every batch of lines at least 320 px wide) against foveate's
(:data:`foveate.channels.text.ocr.REC_MIN_WIDTH`), on the training split of a set.

    python scripts/rec_padding.py [DATA_DIR] [-n 30] [--width 160]

Reads each image with both engines, alternating which goes first, and prints the time per image (median and total),
how many lines read identically, and -- where the set has FUNSD-style annotations (``annotations/<image>.json``
with word boxes and transcriptions) -- each engine's accuracy against the transcriptions: the share of lines read
exactly (spaces ignored) and the character error rate of the words whose centres fall inside each line's box.
Only training-split images are read, so a width chosen from it is not chosen on validation or test pages.
Backs the figures in BENCHMARKS.md ("The recogniser's padding").
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np
from rapidfuzz.distance import Levenshtein


def against_transcription(lines: list[tuple[str, tuple]], words: list[dict]) -> tuple[int, int, int, int]:
    """(lines compared, read exactly, character errors, characters) of OCR ``lines`` (text, box) against the
    transcribed ``words`` whose centres fall inside each line's box (2 px slack), left to right."""
    n = exact = errors = chars = 0
    for text, (x0, y0, x1, y1) in lines:
        inside = sorted(
            (w["box"][0], w["text"])
            for w in words
            if x0 - 2 <= (w["box"][0] + w["box"][2]) / 2 <= x1 + 2
            and y0 - 2 <= (w["box"][1] + w["box"][3]) / 2 <= y1 + 2
        )
        if not inside:
            continue
        truth = "".join(t for _, t in inside).replace(" ", "")
        read = text.replace(" ", "")
        n += 1
        exact += truth == read
        errors += Levenshtein.distance(truth, read)
        chars += len(truth)
    return n, exact, errors, chars


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "data", nargs="?", default=str(Path(__file__).resolve().parents[1].parent / "shared" / "data" / "funsd_forms")
    )
    ap.add_argument("-n", type=int, default=30, help="training images read")
    ap.add_argument("--width", type=int, default=None, help="the narrower padding (default: REC_MIN_WIDTH)")
    args = ap.parse_args()

    from rapidocr import RapidOCR

    from foveate.channels.text.ocr import REC_MIN_WIDTH, _lines, engine_params
    from foveate.core.io import load_image
    from foveate.eval.data import split_of

    data = Path(args.data)
    width = args.width or REC_MIN_WIDTH
    images = sorted({json.loads(line)["image"] for line in (data / "queries.jsonl").open()})
    images = [i for i in images if split_of(data.resolve().name, i, 0) == "train"][: args.n]
    engines = {
        320: RapidOCR(params=engine_params({"Rec.rec_img_shape": [3, 48, 320]})),
        width: RapidOCR(params=engine_params({"Rec.rec_img_shape": [3, 48, width]})),
    }
    times = {w: [] for w in engines}
    scores = {w: np.zeros(4, int) for w in engines}
    same = total = 0
    for k, name in enumerate(images):
        rgb = load_image(data / name)
        bgr = np.ascontiguousarray(rgb[..., ::-1])
        ann = data / "annotations" / (Path(name).stem + ".json")
        words = (
            [w for e in json.loads(ann.read_text())["form"] for w in e["words"] if w["text"].strip()]
            if ann.exists()
            else None
        )
        read = {}
        for w in list(engines) if k % 2 == 0 else list(engines)[::-1]:
            t0 = time.perf_counter()
            res = engines[w](bgr, return_word_box=True)
            if k:  # the first image warms both engines up
                times[w].append(time.perf_counter() - t0)
            read[w] = {ln.box: ln.text for ln in _lines(res, *rgb.shape[:2])}
            if words is not None:
                scores[w] += against_transcription([(t, b) for b, t in read[w].items()], words)
        total += len(read[320])
        same += sum(read[width].get(b) == t for b, t in read[320].items())
        print(f"{k + 1}/{len(images)} {name}", flush=True)
    print(f"\n{data.name}: {len(images)} training images (the first untimed), lines padded to 320 against {width}")
    for w in engines:
        line = f"  {w:4d}: median {statistics.median(times[w]):.3f} s per image, total {sum(times[w]):.1f} s"
        if scores[w][0]:
            n, exact, errors, chars = scores[w]
            line += (
                f"; against the transcriptions: {n} lines, {exact / n:.1%} exact, character error {errors / chars:.2%}"
            )
        print(line)
    print(f"  lines read identically (same box and text): {same} of {total} ({same / max(total, 1):.1%})")


if __name__ == "__main__":
    main()
