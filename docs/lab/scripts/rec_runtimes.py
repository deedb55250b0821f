"""The text recogniser's floor: one model on several runtimes, and the older PP-OCRv4 model beside the bundled one
(docs/lab/journal.md, "The recogniser's floor").

    python docs/lab/scripts/rec_runtimes.py ../shared/data/funsd_forms [--pages 4]
    python docs/lab/scripts/rec_runtimes.py ../shared/data/funsd_forms --v4 ch_PP-OCRv4_rec_infer.onnx [--split test]

Without ``--v4``: the recogniser batches foveate's OCR sends for the first ``--pages`` FUNSD pages are captured,
then run three times each on onnxruntime (float, the model rapidocr ships), OpenVINO f32 and bf16 (the same file,
batches padded as :class:`foveate.channels.text.backend.OpenVinoSession` pads them) and the int8 file ``foveate
prepare --int8`` made (onnxruntime and OpenVINO, where it exists); ms per page of each pass, and the share of output
steps whose best class equals onnxruntime float's.  Where the float model's time goes (op types, onnxruntime's
profiler) is printed first.

With ``--v4 FILE`` (the recogniser inside the ``rapidocr_onnxruntime`` 1.4.4 wheel: ``pip download
rapidocr_onnxruntime==1.4.4 --no-deps``, unzip, ``rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx``): foveate's
OCR of 17 pages of ``--split`` (after one warm-up page) with the bundled recogniser and with that one, alternating
which goes first; median seconds a page and the FUNSD answers present in what each read.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np


def norm(text: str) -> str:
    return re.sub(r"[^0-9a-z]", "", text.lower())


def captured_batches(data: Path, pages: int) -> list[np.ndarray]:
    from foveate.channels.text.ocr import ocr_engine, run_ocr
    from foveate.core.io import load_image

    rec = ocr_engine()._load_rec_model()
    inner, batches = rec.session, []

    def capture(x: np.ndarray) -> np.ndarray:
        batches.append(x.copy())
        return inner(x)

    rec.session = capture
    for path in sorted((data / "images").glob("*.png"))[:pages]:
        run_ocr(load_image(path), "always")
    rec.session = inner
    return batches


def op_profile(model: str, batch: np.ndarray) -> None:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.enable_profiling, so.intra_op_num_threads = True, 2
    so.profile_file_prefix = str(Path(tempfile.gettempdir()) / "rec_profile")
    s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    for _ in range(4):
        s.run(None, {s.get_inputs()[0].name: batch})
    by_op: collections.Counter[str] = collections.Counter()
    profile = Path(s.end_profiling())
    events = json.loads(profile.read_text())
    profile.unlink()
    for e in events:
        if e.get("cat") == "Node":
            by_op[e["args"].get("op_name", "?")] += e["dur"]
    total = sum(by_op.values())
    print("float model, share of node time by op:", {k: round(v / total, 3) for k, v in by_op.most_common(6)})


def runtimes(data: Path, pages: int) -> None:
    import onnxruntime as ort
    import openvino

    from foveate.channels.text.backend import bucket, int8_path, model_path
    from foveate.channels.text.ocr import ocr_engine

    batches = captured_batches(data, pages)
    fp = str(model_path(ocr_engine(), "rec"))
    op_profile(fp, batches[len(batches) // 2])
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    core = openvino.Core()

    def onnxruntime_run(path: str):
        s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        return lambda x: s.run(None, {s.get_inputs()[0].name: x})[0]

    def openvino_run(path: str, precision: str):
        cfg = {"INFERENCE_NUM_THREADS": 2, "INFERENCE_PRECISION_HINT": precision, "PERFORMANCE_HINT": "LATENCY"}
        req = core.compile_model(path, "CPU", cfg).create_infer_request()

        def run(x: np.ndarray) -> np.ndarray:
            n, c, h, w = x.shape
            padded = np.zeros((max(n, 6), c, h, bucket(w)), np.float32)
            padded[:n, :, :, :w] = x
            req.infer([padded])
            return np.array(req.get_output_tensor().data[:n], copy=True)

        return run

    runs = {
        "onnxruntime float": onnxruntime_run(fp),
        "openvino f32": openvino_run(fp, "f32"),
        "openvino bf16": openvino_run(fp, "bf16"),
    }
    if int8_path().is_file():
        runs |= {
            "onnxruntime int8": onnxruntime_run(str(int8_path())),
            "openvino int8": openvino_run(str(int8_path()), "f32"),
        }
    ref = [runs["onnxruntime float"](b) for b in batches]
    for name, run in runs.items():
        passes = []
        for _ in range(3):
            t0 = time.perf_counter()
            outs = [run(b) for b in batches]
            passes.append((time.perf_counter() - t0) / pages * 1000)
        same = np.mean([(o[:, : r.shape[1]].argmax(-1) == r.argmax(-1)).mean() for o, r in zip(outs, ref)])
        print(f"{name}: ms a page, passes 1-3: {', '.join(f'{p:.0f}' for p in passes)}; same best class {same:.4f}")


def older_model(data: Path, v4: str, split: str) -> None:
    from collections import defaultdict

    from rapidocr import OCRVersion, RapidOCR

    from foveate.channels.text.backend import place
    from foveate.channels.text.ocr import _lines, _read, engine_params
    from foveate.core.device import ocr_backend, ocr_threads, tune_allocator
    from foveate.core.io import load_image
    from foveate.eval.data import read_queries, split_of

    tune_allocator()
    answers: dict[str, list[str]] = defaultdict(list)
    for q in read_queries(data)[0]:
        if split_of(data.name, q.image) == split:
            answers[q.image] += [norm(a) for a, _ in q.answers if norm(a)]
    pages = sorted(answers)[:18]
    engines = {
        "bundled": RapidOCR(params=engine_params()),
        "PP-OCRv4": RapidOCR(params=engine_params({"Rec.model_path": v4, "Rec.ocr_version": OCRVersion.PPOCRV4})),
    }
    engines = {k: place(e, ocr_backend(), ocr_threads())[0] for k, e in engines.items()}
    secs: dict[str, list[float]] = defaultdict(list)
    found: collections.Counter[str] = collections.Counter()
    for i, name in enumerate(pages):
        rgb = load_image(data / name)
        bgr = np.ascontiguousarray(rgb[..., ::-1])
        for k in sorted(engines, reverse=bool(i % 2)):
            t0 = time.perf_counter()
            lines = _lines(_read(engines[k], bgr), *rgb.shape[:2])
            if i:
                secs[k].append(time.perf_counter() - t0)
                text = norm(" ".join(ln.text for ln in lines))
                found[k] += sum(a in text for a in answers[name])
    total = sum(len(answers[p]) for p in pages[1:])
    for k in engines:
        print(f"{k}: OCR median {statistics.median(secs[k]):.3f} s a page; answers present {found[k]} of {total}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", type=Path)
    ap.add_argument("--pages", type=int, default=4)
    ap.add_argument("--v4", help="the PP-OCRv4 recogniser's .onnx file")
    ap.add_argument("--split", default="test")
    args = ap.parse_args()
    if args.v4:
        older_model(args.data, args.v4, args.split)
    else:
        runtimes(args.data, args.pages)


if __name__ == "__main__":
    main()
