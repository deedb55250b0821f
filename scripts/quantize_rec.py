"""Make the int8 text recogniser foveate ships, from the float model in the rapidocr wheel.

    python scripts/quantize_rec.py ../shared/data/funsd_forms ../shared/data/wildreceipt \
        [-o src/foveate/channels/text/models/rec_int8.onnx] [--pages 6] [--batches 40]

Calibration: line crops of training-split pages only (``foveate.eval.data.split_of``; ``--pages`` per set, drawn
with a fixed seed), detected and cropped by rapidocr's own detector, prepared exactly as its recogniser prepares a
batch (6 lines, padded to the widest and to ``REC_MIN_WIDTH`` at least).  Static quantization with onnxruntime
(QDQ, per-channel int8 weights, uint8 activations, min-max calibration) of the convolutions and matrix products;
the model is first converted to opset 17 (per-axis QDQ needs opset 13).  The float file's SHA-256 is written beside
it (``rec_int8.json``): :mod:`foveate.channels.text.backend` uses the int8 model only beside that very float model
(its character list is the float model's).

What it costs and gains: BENCHMARKS.md, "Encode against the OCR engine alone".
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import tempfile
from pathlib import Path

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data_dirs", nargs="+", type=Path)
    ap.add_argument("-o", "--out", type=Path, default=Path("src/foveate/channels/text/models/rec_int8.onnx"))
    ap.add_argument("--pages", type=int, default=6, help="training-split pages per set")
    ap.add_argument("--batches", type=int, default=40, help="calibration batches of 6 lines")
    args = ap.parse_args()

    import cv2
    import onnx
    from onnx import version_converter
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process
    from rapidocr import RapidOCR

    from foveate.channels.text.backend import model_path
    from foveate.channels.text.ocr import REC_MIN_WIDTH, engine_params
    from foveate.eval.data import split_of

    engine = RapidOCR(params=engine_params())
    rec = engine._load_rec_model()
    source = model_path(engine, "rec")
    crops: list[np.ndarray] = []
    for d in args.data_dirs:
        pages = sorted(p for p in (d / "images").iterdir() if split_of(d.name, f"images/{p.name}") == "train")
        random.Random(0).shuffle(pages)
        for p in pages[: args.pages]:
            img, op = engine.preprocess_img(cv2.imread(str(p)))
            crops += engine.detect_and_crop(img, op)[0]
    random.Random(1).shuffle(crops)
    batches = []
    for i in range(0, min(len(crops), 6 * args.batches), 6):
        b = crops[i : i + 6]
        ratio = max(REC_MIN_WIDTH / 48, max(c.shape[1] / c.shape[0] for c in b))
        batches.append(np.stack([rec.resize_norm_img(c, ratio) for c in b]).astype(np.float32))
    print(f"{len(crops)} line crops from {len(args.data_dirs)} sets; {len(batches)} calibration batches")

    class Reader(CalibrationDataReader):  # type: ignore[misc]
        def __init__(self) -> None:
            self.it = iter(batches)

        def get_next(self) -> dict[str, np.ndarray] | None:
            b = next(self.it, None)
            return None if b is None else {"x": b}

    with tempfile.TemporaryDirectory() as tmp:
        m17, pre = Path(tmp) / "rec17.onnx", Path(tmp) / "rec_pre.onnx"
        onnx.save(version_converter.convert_version(onnx.load(str(source)), 17), str(m17))
        quant_pre_process(str(m17), str(pre), skip_symbolic_shape=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        quantize_static(
            str(pre),
            str(args.out),
            Reader(),
            quant_format=QuantFormat.QDQ,
            per_channel=True,
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
            op_types_to_quantize=["Conv", "MatMul"],
        )
    sha = hashlib.sha256(source.read_bytes()).hexdigest()
    record = {"source": source.name, "source_sha256": sha, "calibration": [d.name for d in args.data_dirs]}
    args.out.with_suffix(".json").write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.1f} MB) from {source.name} (sha256 {sha[:12]})")


if __name__ == "__main__":
    main()
