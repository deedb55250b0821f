"""OCR at encode time: lines and words with pixel boxes and confidences (rapidocr 3.x: PP-OCR detection and
recognition ONNX models shipped inside its wheel), loaded once per process.  :func:`read_text` is the public
OCR entry point (the whole image; also used to read mosaics in the evaluation); :func:`run_ocr` reads either the
whole image (``"always"``) or, when the gate finds text, the whole image exactly as ``"always"`` does
(``"auto"``, :mod:`.gate`); :func:`ocr_lines` adds a small per-pixels cache.
"""

from __future__ import annotations

import functools
import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...core.config import CHOICE_OPTIONS, OCR_MODES, RECOGNISERS
from ...core.errors import ConfigError, UnsupportedInputError

#: Name and version of the OCR engine, stored with every texture that has the text group.
OCR_ENGINE = "rapidocr-3 PP-OCR (det+cls+rec, ONNX)"
DEFAULT_OCR_MODE = CHOICE_OPTIONS["ocr"][0]
DEFAULT_RECOGNISER = CHOICE_OPTIONS["recogniser"][0]
#: The narrowest input the recogniser pads a batch of lines to, in pixels at its 48 px height.  rapidocr pads every
#: batch to at least 320 (PaddleOCR's training width), so a batch of short fields ("Date:", "12.50") costs a long
#: line's compute.  At 160 a page reads ~10 % (forms) to ~18 % (receipts) faster with the same accuracy against
#: FUNSD's transcriptions to 0.4 points (BENCHMARKS.md, "The recogniser's padding"); narrower, more short fragments
#: ("mm", "(") read differently.
REC_MIN_WIDTH = 160


@dataclass(frozen=True)
class OcrWord:
    """One recognised word: text, pixel box ``(x0, y0, x1, y1)`` and recognition confidence in [0, 1]."""

    text: str
    box: tuple[int, int, int, int]
    score: float


@dataclass(frozen=True)
class OcrLine:
    """One recognised line of text.

    Attributes:
        text: the recognised string.
        box: axis-aligned pixel box ``(x0, y0, x1, y1)`` (x1, y1 exclusive), clipped to the image.
        score: recognition confidence in [0, 1].
        words: the line's words with their own boxes (may be empty when the engine gives none).
    """

    text: str
    box: tuple[int, int, int, int]
    score: float
    words: tuple[OcrWord, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "box": list(self.box),
            "score": round(self.score, 4),
            "words": [{"text": w.text, "box": list(w.box), "score": round(w.score, 4)} for w in self.words],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> OcrLine:
        words = tuple(OcrWord(str(w["text"]), _box(w["box"]), float(w["score"])) for w in d.get("words", ()))
        return cls(str(d["text"]), _box(d["box"]), float(d["score"]), words)


def _box(values: Any) -> tuple[int, int, int, int]:
    """Four pixel coordinates ``(x0, y0, x1, y1)`` as ints."""
    x0, y0, x1, y1 = (int(v) for v in values)
    return x0, y0, x1, y1


_ENGINE_LOCK = threading.Lock()


@dataclass(frozen=True)
class OcrResult:
    """The lines of one image and how they were found: ``mode`` (``auto`` / ``always``) and, for ``auto``, what
    the gate decided (:meth:`foveate.channels.text.gate.GateResult.to_dict`)."""

    lines: list[OcrLine]
    mode: str
    gate: dict[str, Any] | None = None
    runtime: str = ""


def engine_params(changes: dict[str, Any] | None = None) -> dict[str, Any]:
    """rapidocr's settings as foveate reads text, with ``changes`` on top (the benchmark scripts' variants).

    onnxruntime runs on :func:`foveate.core.device.ocr_threads` threads and keeps its memory arena (rapidocr turns
    it off): the detector and recognizer are ~15 % faster for the memory their largest input needed.  Batches of
    lines are padded to :data:`REC_MIN_WIDTH` at least, not rapidocr's 320.  rapidocr's own angle classification is
    off: :func:`_read` runs it where a page's lines are upside down."""
    from ...core.device import ocr_backend, ocr_threads
    from .backend import engine_changes

    ort = "EngineConfig.onnxruntime"
    return {
        "Global.log_level": "error",
        "Global.return_word_box": True,
        # the angle classifier runs only on pages whose lines are upside down (:func:`_read`)
        "Global.use_cls": False,
        f"{ort}.intra_op_num_threads": ocr_threads(),
        f"{ort}.enable_cpu_mem_arena": True,
        "Rec.rec_img_shape": [3, 48, REC_MIN_WIDTH],
        **engine_changes(ocr_backend()),
        **(changes or {}),
    }


@functools.lru_cache(maxsize=len(RECOGNISERS))
def ocr_setup(recogniser: str = DEFAULT_RECOGNISER) -> tuple[Any, str]:
    """The rapidocr engine with :func:`engine_params`, its models on the runtime
    :func:`foveate.core.device.ocr_backend` names (:mod:`.backend`), and that runtime's description.  Models load
    once per process and recogniser; the float ONNX files ship inside the rapidocr wheel; ``recogniser="int8"``
    runs the int8 model ``foveate prepare --int8`` made (a :class:`ConfigError` where there is none)."""
    from rapidocr import RapidOCR

    from ...core.device import ocr_backend, ocr_threads
    from .backend import place

    if recogniser not in RECOGNISERS:
        raise ConfigError(f"unknown recogniser {recogniser!r}; choose one of {', '.join(RECOGNISERS)}")
    return place(RapidOCR(params=engine_params()), ocr_backend(), ocr_threads(), recogniser)


def ocr_engine(recogniser: str = DEFAULT_RECOGNISER) -> Any:
    """The rapidocr engine of :func:`ocr_setup`."""
    return ocr_setup(recogniser)[0]


def ocr_runtime(recogniser: str = DEFAULT_RECOGNISER) -> str:
    """Where the OCR models run (:func:`foveate.channels.text.backend.place`), stored with every texture's text."""
    return str(ocr_setup(recogniser)[1])


def _quad_to_box(quad: Any, h: int, w: int) -> tuple[int, int, int, int]:
    q = np.asarray(quad, np.float64).reshape(-1, 2)
    x0, y0 = np.floor(q.min(0))
    x1, y1 = np.ceil(q.max(0))
    return (int(np.clip(x0, 0, w)), int(np.clip(y0, 0, h)), int(np.clip(x1, 0, w)), int(np.clip(y1, 0, h)))


def _check(image: Any, who: str) -> None:
    if not isinstance(image, np.ndarray) or image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        got = f"{type(image).__name__} {getattr(image, 'shape', '')} {getattr(image, 'dtype', '')}".strip()
        raise UnsupportedInputError(f"{who} takes an (H, W, 3) uint8 RGB array, got {got}")


def _lines(res: Any, h: int, w: int) -> list[OcrLine]:
    """rapidocr's output as :class:`OcrLine` s in reading order."""
    if getattr(res, "txts", None) is None or getattr(res, "boxes", None) is None:
        return []
    words_per_line = res.word_results if len(res.word_results) == len(res.txts) else [()] * len(res.txts)
    lines = []
    for quad, txt, score, words in zip(res.boxes, res.txts, res.scores, words_per_line):
        txt = str(txt).strip()
        if not txt:
            continue
        box = _quad_to_box(quad, h, w)
        if box[2] <= box[0] or box[3] <= box[1]:
            continue
        ws = []
        for wd in words or ():
            if len(wd) >= 3 and wd[2] is not None and str(wd[0]).strip():
                wb = _quad_to_box(wd[2], h, w)
                if wb[2] > wb[0] and wb[3] > wb[1]:
                    ws.append(OcrWord(str(wd[0]).strip(), wb, float(wd[1])))
        lines.append(OcrLine(txt, box, float(score), tuple(ws)))
    lines.sort(key=lambda ln: (ln.box[1] + ln.box[3], ln.box[0]))
    return lines


#: lines the angle classifier looks at to decide whether a page is upside down: the widest, two classifier batches
ORIENTATION_SAMPLE = 12


def _upside_down(engine: Any, crops: list[np.ndarray]) -> bool:
    """Whether the :data:`ORIENTATION_SAMPLE` widest line crops read, on average, as more likely turned 180 degrees
    than not: then every line goes through the classifier, as with rapidocr's ``use_cls``.  (The mean probability,
    not a count of confident votes: on a page turned over, the classifier says "180" for most lines but often below
    its 0.9 threshold.)"""
    widest = sorted(crops, key=lambda c: c.shape[1] / max(1, c.shape[0]), reverse=True)[:ORIENTATION_SAMPLE]
    votes = engine._load_cls_model()(widest).cls_res or []
    p180 = [float(score) if "180" in str(label) else 1.0 - float(score) for label, score in votes]
    return bool(p180) and sum(p180) / len(p180) > 0.5


def _read(engine: Any, bgr: np.ndarray) -> Any:
    """rapidocr's pipeline (detect, crop, recognise, map back: ``RapidOCR.__call__``) with the angle classifier only
    on a page whose lines are upside down (:func:`_upside_down`): a page the right way up -- nearly every page --
    skips it, and with it the lines it turned wrongly at its 0.9 threshold."""
    from rapidocr.ch_ppocr_cls import TextClsOutput
    from rapidocr.main import RapidOCRError  # rapidocr's "nothing detected" / "nothing recognised"

    ori = engine.load_img(bgr)
    img, op_record = engine.preprocess_img(ori)
    try:
        crops, det_res = engine.detect_and_crop(img, op_record)
    except RapidOCRError:
        return None
    cls_res = TextClsOutput()
    if crops and _upside_down(engine, crops):
        crops, cls_res = engine.cls_and_rotate(crops)
    try:
        rec_res = engine.recognize_txt(crops)
    except RapidOCRError:
        return None
    return engine.build_final_output(ori, det_res, cls_res, rec_res, crops, op_record)


def run_ocr(image: np.ndarray, mode: str = DEFAULT_OCR_MODE, recogniser: str = DEFAULT_RECOGNISER) -> OcrResult:
    """OCR an RGB image: the whole image (``mode="always"``), or the same when the gate finds text and nothing when
    it does not (``"auto"``; :mod:`foveate.channels.text.gate`), its lines read by the ``recogniser`` named.

    Raises:
        UnsupportedInputError: not an (H, W, 3) uint8 array.  ConfigError: an unknown mode or recogniser, or the
        int8 recogniser not made.
    """
    _check(image, "read_text")
    if mode not in OCR_MODES:
        raise ConfigError(f"unknown OCR mode {mode!r}; choose one of {', '.join(OCR_MODES)}")
    h, w = image.shape[:2]
    if min(h, w) < 8:
        from .gate import GateResult

        return OcrResult([], mode, GateResult("none").to_dict() if mode == "auto" else None, ocr_runtime(recogniser))
    bgr = np.ascontiguousarray(image[..., ::-1])
    engine = ocr_engine(recogniser)
    gate = None
    with _ENGINE_LOCK:  # the engine keeps per-call state; one call at a time
        if mode == "auto":
            from .gate import gate_text

            gate = gate_text(engine, bgr)
        res = _read(engine, bgr) if gate is None or gate.detector == "full" else None
    return OcrResult(_lines(res, h, w), mode, None if gate is None else gate.to_dict(), ocr_runtime(recogniser))


def read_text(image: np.ndarray) -> list[OcrLine]:
    """OCR a whole RGB image: its text lines, each with words, pixel boxes and confidences, in reading order.

    Args:
        image: (H, W, 3) uint8 RGB.
    Returns:
        lines sorted top to bottom, then left to right (an empty list for a page without text or an image
        too small to hold any).
    Raises:
        UnsupportedInputError: not an (H, W, 3) uint8 array.
    """
    return run_ocr(image, "always").lines


_OCR_CACHE: OrderedDict[str, OcrResult] = OrderedDict()
_OCR_CACHE_SIZE = 16


def _pixels_key(image: np.ndarray) -> str:
    h = hashlib.sha256(f"{image.shape}".encode())
    h.update(np.ascontiguousarray(image).data)
    return h.hexdigest()


def ocr_result(
    image: np.ndarray, mode: str = DEFAULT_OCR_MODE, cache: bool = True, recogniser: str = DEFAULT_RECOGNISER
) -> OcrResult:
    """:func:`run_ocr` with a small in-process cache keyed by the pixels' hash, the mode and the recogniser, so
    encoding the same image again (another preset, another patch size) does not OCR it twice.  ``cache=False``
    always runs the OCR."""
    if not cache:
        return run_ocr(image, mode, recogniser)
    key = f"{mode}:{recogniser}:{_pixels_key(image)}"
    if key in _OCR_CACHE:
        _OCR_CACHE.move_to_end(key)
        return _OCR_CACHE[key]
    result = run_ocr(image, mode, recogniser)
    _OCR_CACHE[key] = result
    while len(_OCR_CACHE) > _OCR_CACHE_SIZE:
        _OCR_CACHE.popitem(last=False)
    return result


def ocr_lines(image: np.ndarray, cache: bool = True, mode: str = DEFAULT_OCR_MODE) -> list[OcrLine]:
    """The lines of :func:`ocr_result`: what the text group of an encode with option ``ocr=mode`` reads."""
    return ocr_result(image, mode, cache).lines


def clear_ocr_cache() -> None:
    """Forget cached OCR results (benchmarks time the OCR itself)."""
    _OCR_CACHE.clear()
