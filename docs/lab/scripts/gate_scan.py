"""What the OCR gate would read at other settings: full-page OCR of every image of a folder, then the gate's
detector on the image's small copy, and for each (copy side, probability threshold, ink step) the share of
full-page lines in the images the gate would read, and how many images without text it would read.

    python scripts/gate_scan.py ../shared/data/coco_panoptic_grounding [--limit N]

Backs "Every shared photo, later" in BENCHMARKS.md (issue 14).  Prints the images whose lines the shipped setting
(``foveate.channels.text.gate``: side 576, threshold 0.2, step 48 when this was written; the shipped gate now
also reads its blobs' windows, step 4 of that module) misses.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

SIDES, THRESHOLDS, STEPS = (576, 736), (0.1, 0.15, 0.2, 0.3), (16, 32, 48, 64)


def blobs(det, bgr: np.ndarray, side: int, threshold: float) -> list[tuple[int, int]]:
    """(area, strongest grey step) of each blob of the detector's map on a copy whose long side is ``side``."""
    import cv2

    from foveate.channels.text import gate as G

    h, w = bgr.shape[:2]
    s = min(1.0, side / max(h, w))
    sh, sw = max(32, int(round(h * s / 32)) * 32), max(32, int(round(w * s / 32)) * 32)
    small = cv2.resize(bgr, (sw, sh), interpolation=cv2.INTER_AREA)
    prob = det.session(G._normalise(det.get_preprocess(), small))[0, 0]
    grey = cv2.cvtColor(small, cv2.COLOR_BGR2GRAY).astype(np.int16)
    step = np.zeros(grey.shape, np.int16)
    np.maximum(step[:, 1:], np.abs(np.diff(grey, axis=1)), out=step[:, 1:])
    np.maximum(step[1:, :], np.abs(np.diff(grey, axis=0)), out=step[1:, :])
    n, _, stats, _ = cv2.connectedComponentsWithStats((prob >= threshold).astype(np.uint8), connectivity=8)
    return [(int(a), int(step[y : y + bh, x : x + bw].max())) for x, y, bw, bh, a in stats[1:]]


def main() -> None:
    import cv2

    from foveate.channels.text.ocr import clear_ocr_cache, ocr_engine, run_ocr
    from foveate.core.io import load_image
    from foveate.channels.text import gate as G
    from foveate.store.ingest import expand_images

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--limit", type=int, default=None)
    args = ap.parse_args()
    root = args.folder / "images" if (args.folder / "images").is_dir() else args.folder
    paths = expand_images([root])[: args.limit]
    det = ocr_engine()._load_det_model()
    recs = []
    for i, p in enumerate(paths):
        rgb = load_image(p)
        bgr = cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR)
        clear_ocr_cache()
        lines = run_ocr(rgb, "always").lines
        recs.append((p.name, lines, {(s, t): blobs(det, bgr, s, t) for s in SIDES for t in THRESHOLDS}))
        print(f"\r{i + 1}/{len(paths)} images", end="", flush=True)
    total = sum(len(r[1]) for r in recs)
    empty = sum(1 for r in recs if not r[1])
    print(f"\n{len(recs)} images, {total} full-page lines, {empty} images without text")
    print("side  threshold  step  line recall  images without text read")
    for s in SIDES:
        for t in THRESHOLDS:
            for st in STEPS:
                read = [any(step >= st for _, step in r[2][(s, t)]) for r in recs]
                missed = sum(len(r[1]) for r, rd in zip(recs, read) if not rd)
                tf = sum(1 for r, rd in zip(recs, read) if rd and not r[1])
                mark = "  <- shipped" if (s, t, st) == (G.GATE_SIDE, G.GATE_THRESHOLD, G.GATE_MIN_STEP) else ""
                print(
                    f"{s:4d}  {t:9.2f}  {st:4d}  {100.0 * (total - missed) / max(total, 1):10.1f} %  "
                    f"{tf:3d} / {empty}{mark}"
                )
    for name, lines, b in recs:
        if lines and not any(step >= G.GATE_MIN_STEP for _, step in b[(G.GATE_SIDE, G.GATE_THRESHOLD)]):
            print(f"missed by the shipped gate: {name}: " + ", ".join(f"{ln.text!r} {ln.box}" for ln in lines))


if __name__ == "__main__":
    main()
