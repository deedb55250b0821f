"""The int8 text recogniser, made once per machine from the float model in the rapidocr wheel
(``scripts/quantize_rec.py``, calibrated on training-split pages of real sets; :func:`generated_pages` for
``foveate prepare --int8`` and the tests, which need a model and no data set).  Encodes use it only when asked
(option ``recogniser=int8``).

Calibration: the line crops rapidocr's own detector finds on the given pages, prepared exactly as its recogniser
prepares a batch (6 lines, padded to the widest and to ``REC_MIN_WIDTH`` at least).  Static quantization with
onnxruntime (QDQ, per-channel int8 weights, uint8 activations, min-max calibration) of the convolutions and matrix
products; the model is first converted to opset 17 (per-axis QDQ needs opset 13).  The float file's SHA-256 is
written beside it: :mod:`.backend` uses the int8 model only beside that very float model.  Needs the ``onnx`` extra.
"""

from __future__ import annotations

import hashlib
import json
import random
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np


def quantize_recogniser(pages: Iterable[np.ndarray], out: Path, batches: int = 40) -> dict[str, Any]:
    """Quantize rapidocr's float recogniser with line crops of ``pages`` (BGR uint8) into ``out`` (and
    ``out.with_suffix(".json")``: the source file's name and SHA-256).  Returns that record."""
    import onnx
    from onnx import version_converter
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process
    from rapidocr import RapidOCR

    from .backend import model_path
    from .ocr import REC_MIN_WIDTH, engine_params

    engine: Any = RapidOCR(params=engine_params())
    rec = engine._load_rec_model()
    source = model_path(engine, "rec")
    crops: list[np.ndarray] = []
    for bgr in pages:
        img, op = engine.preprocess_img(bgr)
        crops += engine.detect_and_crop(img, op)[0]
    random.Random(1).shuffle(crops)
    data = []
    for i in range(0, min(len(crops), 6 * batches), 6):
        b = crops[i : i + 6]
        ratio = max(REC_MIN_WIDTH / 48, max(c.shape[1] / c.shape[0] for c in b))
        data.append(np.stack([rec.resize_norm_img(c, ratio) for c in b]).astype(np.float32))

    class Reader(CalibrationDataReader):  # type: ignore[misc]
        def __init__(self) -> None:
            self.it = iter(data)

        def get_next(self) -> dict[str, np.ndarray] | None:
            b = next(self.it, None)
            return None if b is None else {"x": b}

    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        m17, pre, q = Path(tmp) / "rec17.onnx", Path(tmp) / "rec_pre.onnx", Path(tmp) / "rec_int8.onnx"
        onnx.save(version_converter.convert_version(onnx.load(str(source)), 17), str(m17))
        quant_pre_process(str(m17), str(pre), skip_symbolic_shape=True)
        quantize_static(
            str(pre),
            str(q),
            Reader(),
            quant_format=QuantFormat.QDQ,
            per_channel=True,
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
            op_types_to_quantize=["Conv", "MatMul"],
        )
        q.replace(out)  # same file system as the cache only by chance: replace, then write the record last
    record = {
        "source": source.name,
        "source_sha256": hashlib.sha256(source.read_bytes()).hexdigest(),
        "calibration_lines": len(crops),
    }
    out.with_suffix(".json").write_text(json.dumps(record, indent=1) + "\n")
    return record


def generated_pages(per_kind: int = 2, seed: int = 0) -> list[np.ndarray]:
    """Calibration pages from nothing but the package (the tests' int8 model): the bundled page and generated
    forms, receipts, invoices and letters (``foveate.synth``, scanned look), BGR."""
    from ...core.io import load_image
    from ...synth.documents import invoice, letter, receipt
    from ...synth.draw import render
    from ...synth.forms import form

    rgb = [load_image(Path(__file__).resolve().parents[2] / "examples" / "page.png")]
    r = random.Random(seed)
    for kind in (form, receipt, invoice, letter):
        rgb += [render(kind(r), r) for _ in range(per_kind)]
    return [np.ascontiguousarray(im[..., ::-1]) for im in rgb]
