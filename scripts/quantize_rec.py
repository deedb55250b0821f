"""Make the int8 text recogniser from training-split pages of real sets instead of the generated pages
``foveate prepare --int8`` uses (both write where foveate looks: ``$FOVEATE_CACHE/ocr/rec_int8.onnx``).

    python scripts/quantize_rec.py ../shared/data/funsd_forms ../shared/data/wildreceipt [--pages 6] [-o PATH]

How it quantizes: :mod:`foveate.channels.text.quantize`.  BENCHMARKS.md, "Encode against the OCR engine alone".
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data_dirs", nargs="+", type=Path)
    ap.add_argument("-o", "--out", type=Path, default=None, help="default: where foveate looks")
    ap.add_argument("--pages", type=int, default=6, help="training-split pages per set")
    args = ap.parse_args()

    import cv2

    from foveate.channels.text.backend import int8_path
    from foveate.channels.text.quantize import quantize_recogniser
    from foveate.eval.data import split_of

    pages = []
    for d in args.data_dirs:
        names = sorted(p for p in (d / "images").iterdir() if split_of(d.name, f"images/{p.name}") == "train")
        random.Random(0).shuffle(names)
        pages += [cv2.imread(str(p)) for p in names[: args.pages]]
    out = args.out or int8_path()
    record = quantize_recogniser(pages, out)
    print(f"wrote {out} from {record['source']} ({record['calibration_lines']} calibration lines)")


if __name__ == "__main__":
    main()
