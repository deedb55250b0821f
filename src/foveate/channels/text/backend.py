"""The runtime under rapidocr's ONNX models: the same model files, run where :func:`foveate.core.device.ocr_backend`
says.

rapidocr builds each model's session with onnxruntime.  On an x86 CPU OpenVINO runs the text detector 3-4x as fast
from the same ``.onnx`` file, with the same probability map to 1e-6; the float recogniser runs at the same speed in
either, so the recogniser moves as an int8 model (``scripts/quantize_rec.py``: calibrated on training-split line
crops), ~1.7x as fast.  With onnxruntime-gpu and a GPU every model runs on CUDA through rapidocr's own switch.  A
model's session is swapped after rapidocr built it: the pre- and post-processing stay rapidocr's.  What each costs
and reads: BENCHMARKS.md, "Encode against the OCR engine alone".
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np


class OpenVinoSession:
    """A compiled OpenVINO model with rapidocr's session interface: called with the input batch, returns the first
    output (a copy: the runtime reuses its output buffer)."""

    def __init__(self, model_path: str | Path, threads: int) -> None:
        import openvino

        core = openvino.Core()
        config = {"INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY"}
        self.model_path = Path(model_path)
        self._request = core.compile_model(str(model_path), "CPU", config).create_infer_request()

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        self._request.infer([np.ascontiguousarray(batch, dtype=np.float32)])
        return np.array(self._request.get_output_tensor().data, copy=True)


def engine_changes(backend: str) -> dict[str, Any]:
    """rapidocr settings for ``backend`` (``cuda``: onnxruntime's CUDA provider for every model)."""
    if backend == "cuda":
        return {f"EngineConfig.onnxruntime.{k}": v for k, v in {"use_cuda": True}.items()}
    return {}


#: the int8 recogniser (``scripts/quantize_rec.py``) and the record of the float model it was made from
REC_INT8 = Path(__file__).parent / "models" / "rec_int8.onnx"
REC_INT8_SOURCE = REC_INT8.with_suffix(".json")


def place(engine: Any, backend: str, threads: int) -> tuple[Any, str]:
    """Move ``engine``'s models to ``backend``: on ``"openvino"`` the detector (the very file rapidocr loaded) and the
    recogniser (the int8 model, when it was made from the float one rapidocr loaded: :func:`int8_recogniser`).
    Returns the engine and a description of where its models run, stored with every texture's text."""
    if backend == "cuda":
        return engine, "onnxruntime CUDA"
    if backend != "openvino":
        return engine, "onnxruntime CPU"
    engine._load_det_model().session = OpenVinoSession(model_path(engine, "det"), threads)
    int8 = int8_recogniser(engine)
    if int8 is None:
        return engine, "openvino CPU (detector), onnxruntime CPU"
    engine._load_rec_model().session = OpenVinoSession(int8, threads)
    return engine, "openvino CPU, int8 recogniser"


def int8_recogniser(engine: Any) -> Path | None:
    """The shipped int8 recogniser, if it was quantized from the float model rapidocr loaded (same SHA-256: its
    character list and input are that model's); else ``None`` (a rapidocr with another recogniser keeps its own)."""
    if not (REC_INT8.is_file() and REC_INT8_SOURCE.is_file()):
        return None
    want = json.loads(REC_INT8_SOURCE.read_text())["source_sha256"]
    got = hashlib.sha256(model_path(engine, "rec").read_bytes()).hexdigest()
    return REC_INT8 if got == want else None


def model_path(engine: Any, task: str) -> Path:
    """The file of rapidocr's ``task`` model (``det``, ``rec``, ``cls``): the configured path, else its default
    model, resolved as rapidocr resolves it (the model table's file name under the models folder of its wheel)."""
    import rapidocr
    from rapidocr.inference_engine.base import FileInfo

    cfg = engine.cfg[task.capitalize()]
    if cfg.get("model_path"):
        return Path(cfg.model_path)
    loaded = {"det": engine._load_det_model, "rec": engine._load_rec_model, "cls": engine._load_cls_model}[task]()
    info = loaded.session.get_model_url(
        FileInfo(
            engine_type=cfg.engine_type,
            ocr_version=cfg.ocr_version,
            task_type=cfg.task_type,
            lang_type=cfg.lang_type,
            model_type=cfg.model_type,
        )
    )
    root = Path(cfg.get("model_root_dir") or Path(rapidocr.__file__).parent / "models")
    return root / Path(info["model_dir"]).name
