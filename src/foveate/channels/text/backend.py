"""The runtime under rapidocr's ONNX models: the same model files, run where :func:`foveate.core.device.ocr_backend`
says.

rapidocr builds each model's session with onnxruntime.  On an x86 CPU OpenVINO runs the text detector 3-4x as fast
from the same ``.onnx`` file, with the same probability map to 1e-6; the float recogniser runs at the same speed in
either.  An int8 recogniser runs 1.2-1.7x as fast where a texture asks for it (option ``recogniser=int8``) and one was
made (``foveate prepare --int8`` from generated pages, ``scripts/quantize_rec.py`` from training-split pages of real
sets, into the cache: :mod:`.quantize`); it reads some lines differently, so it is never used unasked.  With
onnxruntime-gpu and a GPU every model runs on CUDA through rapidocr's own switch.  A model's session is swapped
after rapidocr built it: the pre- and post-processing stay rapidocr's.  What each costs and reads: BENCHMARKS.md,
"Encode against the OCR engine alone".
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

#: OpenVINO prepares its kernels for each new input shape on first use (2-5x that call's time: ~150 ms for a
#: recogniser batch), so the recogniser's inputs are padded up to fewer shapes (:func:`bucket`): batches to
#: rapidocr's batch size, widths up to the next of a few sizes, 32 px apart up to 256 px and then about 1/8 apart.
#: The padding is what rapidocr pads a batch with itself (zeros after normalisation), and the outputs are cut back.
SHAPE_STEP = 32


def bucket(size: int) -> int:
    """The padded size for ``size`` px: a multiple of :data:`SHAPE_STEP` up to 256, then of the power of two at most
    an eighth of ``size`` (at most ~1/8 more pixels to compute; ~16 widths from 160 to 2,048 px)."""
    step = SHAPE_STEP
    while step * 8 < size:
        step *= 2
    return -(-size // step) * step


class OpenVinoSession:
    """A compiled OpenVINO model with rapidocr's session interface: called with the input batch, returns the first
    output for that batch (a copy: the runtime reuses its output buffer).

    ``kind="det"``: the detector, as it is: padding a page changes its probability map well inside the page (its
    receptive field is most of the page), and a new page size costs it only ~1.5x once.  ``kind="rec"``: the
    recogniser; the batch padded with blank lines to ``batch`` and its width with zeros up to :func:`bucket`, its
    per-step output cut back to the steps of the unpadded width (:func:`rec_steps`)."""

    def __init__(self, model_path: str | Path, threads: int, kind: str = "det", batch: int = 6) -> None:
        import openvino

        core = openvino.Core()
        config = {"INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY"}
        self.model_path, self.kind, self.batch = Path(model_path), kind, batch
        self._request = core.compile_model(str(model_path), "CPU", config).create_infer_request()

    def _infer(self, x: np.ndarray, cut: tuple[Any, ...]) -> np.ndarray:
        """The output for ``x``, cut to ``cut`` and copied (only the part kept: a recogniser batch's output is
        6 x steps x 18,710 classes, up to 100 MB)."""
        self._request.infer([np.ascontiguousarray(x, dtype=np.float32)])
        return np.array(self._request.get_output_tensor().data[cut], copy=True)

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        n, _, h, w = batch.shape
        up = bucket(w)
        if self.kind == "rec":
            x = np.zeros((max(n, self.batch), batch.shape[1], h, up), np.float32)
            x[:n, :, :, :w] = batch
            return self._infer(x, (slice(0, n), slice(0, rec_steps(w))))
        return self._infer(batch, (Ellipsis,))


def rec_steps(width: int) -> int:
    """Output steps of the PP-OCR recogniser for an input ``width`` px wide: ``width / 8`` rounded, halves down
    (its stride is 8 px; checked against the model over every third width from 8 to 1,200 px in the tests)."""
    return -(-(width - 4) // 8)


def engine_changes(backend: str) -> dict[str, Any]:
    """rapidocr settings for ``backend`` (``cuda``: onnxruntime's CUDA provider for every model)."""
    if backend == "cuda":
        return {f"EngineConfig.onnxruntime.{k}": v for k, v in {"use_cuda": True}.items()}
    return {}


def int8_path() -> Path:
    """Where the int8 recogniser is kept (``foveate prepare --int8``, ``scripts/quantize_rec.py``, :mod:`.quantize`):
    ``$FOVEATE_CACHE/ocr/rec_int8.onnx``, its record (``.json``) beside it."""
    from ...query.text.query_onnx import cache_root

    return cache_root() / "ocr" / "rec_int8.onnx"


def place(engine: Any, backend: str, threads: int, recogniser: str = "float") -> tuple[Any, str]:
    """Move ``engine``'s models to ``backend``: on ``"openvino"`` the detector (the very file rapidocr loaded) and,
    for ``recogniser="int8"``, the int8 recogniser made from the float one rapidocr loaded (:func:`int8_recogniser`).
    Returns the engine and a description of where its models run, stored with every texture's text.

    Raises:
        ConfigError: ``recogniser="int8"`` where none was made from this model, or off OpenVINO."""
    from ...core.errors import ConfigError

    int8 = None
    if recogniser == "int8":
        int8 = int8_recogniser(engine)
        if int8 is None:
            raise ConfigError(
                "recogniser=int8: no int8 recogniser was made from this rapidocr's model on this machine; "
                "run: foveate prepare --int8 (needs the 'onnx' extra)"
            )
        if backend != "openvino":
            raise ConfigError(f"recogniser=int8 runs on OpenVINO only; the OCR runtime here is {backend}")
    if backend == "cuda":
        return engine, "onnxruntime CUDA"
    if backend != "openvino":
        return engine, "onnxruntime CPU"
    engine._load_det_model().session = OpenVinoSession(model_path(engine, "det"), threads, "det")
    if int8 is None:
        return engine, "openvino CPU (detector), onnxruntime CPU"
    rec = engine._load_rec_model()
    rec.session = OpenVinoSession(int8, threads, "rec", rec.rec_batch_num)
    return engine, "openvino CPU, int8 recogniser"


def int8_recogniser(engine: Any) -> Path | None:
    """The int8 recogniser in the cache (:func:`int8_path`), if it was quantized from the float model rapidocr
    loaded (same SHA-256: its character list and input are that model's); else ``None`` (none made, or a rapidocr
    with another recogniser: the float one runs)."""
    path = int8_path()
    record = path.with_suffix(".json")
    if not (path.is_file() and record.is_file()):
        return None
    try:
        want = json.loads(record.read_text())["source_sha256"]
    except (ValueError, KeyError, TypeError):
        return None
    got = hashlib.sha256(model_path(engine, "rec").read_bytes()).hexdigest()
    return path if got == want else None


def model_path(engine: Any, task: str) -> Path:
    """The file of rapidocr's ``task`` model (``det``, ``rec``, ``cls``): the configured path, else its default
    model, resolved as rapidocr resolves it (the model table's file name under the models folder of its wheel)."""
    import rapidocr
    from rapidocr.inference_engine.base import FileInfo, InferSession

    cfg = engine.cfg[task.capitalize()]
    if cfg.get("model_path"):
        return Path(cfg.model_path)
    info = InferSession.get_model_url(
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
