"""Where a page's OCR time goes, and what rapidocr's own switches would save.

    python scripts/ocr_profile.py [FOLDER] [-n 6]

Reads the first ``n`` images of FOLDER (default: the shared FUNSD forms) with the engine foveate uses
(:func:`foveate.channels.text.ocr.ocr_engine`'s settings: foveate's thread count, memory arena on, word boxes) and with
variants of it: no angle classifier, larger recognition batches, no word boxes, rapidocr's own padding.  Prints the
median wall time per page of each variant and the detection / classification / recognition split of rapidocr's own
timer on the last page.
Backs the figures in BENCHMARKS.md ("OCR only where there is text").
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

VARIANTS = {
    "as foveate reads": {},
    "no angle classifier": {"Global.use_cls": False},
    "recognition batch 24 (default 6)": {"Rec.rec_batch_num": 24},
    "no word boxes": {"Global.return_word_box": False},
    "lines padded to 320 (rapidocr's)": {"Rec.rec_img_shape": [3, 48, 320]},
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "folder",
        nargs="?",
        default=str(Path(__file__).resolve().parents[1].parent / "shared" / "data" / "funsd_forms" / "images"),
    )
    ap.add_argument("-n", type=int, default=6, help="images read per variant")
    args = ap.parse_args()

    from rapidocr import RapidOCR

    from foveate.channels.text.ocr import engine_params
    from foveate.core.io import load_image

    paths = sorted(p for p in Path(args.folder).iterdir() if p.suffix.lower() in {".png", ".jpg", ".jpeg"})[: args.n]
    if not paths:
        raise SystemExit(f"no images in {args.folder}")
    images = [np.ascontiguousarray(load_image(p)[..., ::-1]) for p in paths]
    for name, changes in VARIANTS.items():
        params = engine_params(changes)
        engine = RapidOCR(params=params)
        words = params["Global.return_word_box"]
        engine(images[0], return_word_box=words)  # load and warm
        times, out = [], None
        for img in images:
            t0 = time.perf_counter()
            out = engine(img, return_word_box=words)
            times.append(time.perf_counter() - t0)
        split = ", ".join("-" if s is None else f"{s:.3f}" for s in (getattr(out, "elapse_list", None) or []))
        print(
            f"{name:34s} median {statistics.median(times):.3f} s per page ({len(images)} pages); last page: "
            f"{len(out.txts or ())} lines, det / cls / rec {split} s"
        )


if __name__ == "__main__":
    main()
