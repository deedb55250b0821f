"""Where the OCR models run (:mod:`foveate.channels.text.backend`): OpenVINO's detector against onnxruntime's on the
same file, the int8 recogniser against the float one and against the printed text, the angle classifier only on a
page turned over, and the runtime chosen in one place.  Real rapidocr models throughout."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest

from foveate.channels.text import backend as B
from foveate.channels.text import ocr as O
from foveate.channels.text.gate import _normalise
from foveate.core.device import ocr_backend
from foveate.core.errors import ConfigError, DeviceError


def _engine(backend: str, recogniser: str = "int8"):
    from rapidocr import RapidOCR

    return B.place(RapidOCR(params=O.engine_params()), backend, 2, recogniser)


@pytest.fixture(scope="module", autouse=True)
def prepared(tmp_path_factory):
    """An int8 recogniser in a cache of its own, calibrated on generated pages (the tests read no data set; the one
    measured in BENCHMARKS.md is calibrated on training-split pages by scripts/quantize_rec.py)."""
    from foveate.channels.text.quantize import generated_pages, quantize_recogniser

    mp = pytest.MonkeyPatch()
    mp.setenv("FOVEATE_CACHE", str(tmp_path_factory.mktemp("cache")))
    quantize_recogniser(generated_pages(per_kind=1), B.int8_path(), batches=12)
    yield
    mp.undo()


@pytest.fixture(scope="module")
def engines(prepared):
    return {"openvino": _engine("openvino"), "onnxruntime": _engine("onnxruntime", "float")}


def _exact(lines, truth) -> int:
    read = {ln.text for ln in lines}
    return sum(t["text"] in read for t in truth)


def test_openvino_runs_the_same_detector_as_onnxruntime(engines, page):
    """Same file, same probability map (to float rounding): the detector's runtime changes its speed only."""
    (ov, desc), (ort, _) = engines["openvino"], engines["onnxruntime"]
    assert isinstance(ov._load_det_model().session, B.OpenVinoSession) and desc == "openvino CPU, int8 recogniser"
    det = ort._load_det_model()
    bgr = np.ascontiguousarray(page.image[..., ::-1])
    x = _normalise(det.get_preprocess(), cv2.resize(bgr, (640, 832), interpolation=cv2.INTER_AREA))
    a, b = det.session(x), ov._load_det_model().session(x)
    assert a.shape == b.shape and float(np.abs(a - b).max()) < 1e-4


def test_the_int8_recogniser_is_used_only_when_asked_and_beside_the_model_it_was_made_from(tmp_path, monkeypatch):
    record = json.loads(B.int8_path().with_suffix(".json").read_text())
    (_, desc) = _engine("openvino")
    assert desc.endswith("int8 recogniser") and record["source"].startswith("PP-OCR")
    engine, desc = _engine("openvino", "float")  # made, not asked for: the float one
    assert desc == "openvino CPU (detector), onnxruntime CPU"
    assert not isinstance(engine._load_rec_model().session, B.OpenVinoSession)
    with pytest.raises(ConfigError, match="runs on OpenVINO only"):
        _engine("onnxruntime")
    monkeypatch.setenv("FOVEATE_CACHE", str(tmp_path))
    with pytest.raises(ConfigError, match="foveate prepare --int8"):  # asked for, not made: no silent float
        _engine("openvino")
    B.int8_path().parent.mkdir(parents=True)
    B.int8_path().write_bytes(b"")
    B.int8_path().with_suffix(".json").write_text(json.dumps({**record, "source_sha256": "0" * 64}))
    with pytest.raises(ConfigError, match="no int8 recogniser was made from this rapidocr's model"):
        _engine("openvino")


def test_the_recogniser_is_part_of_the_texture_config(page):
    """The two recognisers read some lines differently, so a texture read by one is never taken for the other's."""
    from foveate import EncodeConfig, encode

    float_cfg, int8_cfg = EncodeConfig(), EncodeConfig(options={"recogniser": "int8"})
    assert EncodeConfig(options={"recogniser": "float"}) == float_cfg and float_cfg.hash() != int8_cfg.hash()
    with pytest.raises(ConfigError, match="recogniser='fp4' is not one of float, int8"):
        EncodeConfig(options={"recogniser": "fp4"})
    a, b = (encode(page.image, cfg, device="cpu").extras["text"] for cfg in (float_cfg, int8_cfg))
    assert a["ocr"]["runtime"] == "openvino CPU (detector), onnxruntime CPU"
    assert b["ocr"]["runtime"] == "openvino CPU, int8 recogniser"
    read = [{t["text"] for t in x["lines"]} for x in (a, b)]
    assert sum(t["text"] in read[1] for t in page.lines) >= 0.9 * sum(t["text"] in read[0] for t in page.lines)


def test_the_angle_classifier_runs_only_on_a_page_turned_over(engines, page, monkeypatch):
    engine = engines["openvino"][0]
    calls = []
    cls = engine._load_cls_model()
    real = type(cls).__call__
    monkeypatch.setattr(type(cls), "__call__", lambda self, imgs: calls.append(len(imgs)) or real(self, imgs))
    bgr = np.ascontiguousarray(page.image[..., ::-1])
    upright = O._lines(O._read(engine, bgr), *bgr.shape[:2])
    assert len(calls) == 1 and calls[0] <= O.ORIENTATION_SAMPLE  # the sample only: no line turned
    calls.clear()
    turned = np.ascontiguousarray(bgr[::-1, ::-1])
    over = O._lines(O._read(engine, turned), *bgr.shape[:2])
    assert len(calls) == 2 and calls[1] >= len(over)  # the sample, then every line detected
    assert _exact(over, page.lines) >= 0.9 * _exact(upright, page.lines)


def test_the_runtime_is_chosen_in_one_place(monkeypatch):
    monkeypatch.setenv("FOVEATE_OCR_BACKEND", "onnxruntime")
    assert ocr_backend() == "onnxruntime"
    monkeypatch.setenv("FOVEATE_OCR_BACKEND", "tpu")
    with pytest.raises(DeviceError, match="FOVEATE_OCR_BACKEND must be one of"):
        ocr_backend()
    monkeypatch.delenv("FOVEATE_OCR_BACKEND")
    assert ocr_backend() in ("openvino", "cuda")  # openvino is a core dependency
    assert B.engine_changes("cuda") == {"EngineConfig.onnxruntime.use_cuda": True}


def test_the_texture_records_where_its_text_was_read(page_texture):
    assert page_texture.extras["text"]["ocr"]["runtime"] == O.ocr_runtime()


def test_the_recogniser_output_steps_are_known_for_every_width():
    """:func:`foveate.channels.text.backend.rec_steps` (how the padded output is cut back) against the float model
    itself, every third width."""
    import onnxruntime as ort
    from rapidocr import RapidOCR

    path = B.model_path(RapidOCR(params=O.engine_params()), "rec")
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for w in range(8, 1201, 3):
        assert sess.run(None, {"x": np.zeros((1, 3, 48, w), np.float32)})[0].shape[1] == B.rec_steps(w), w


def test_padding_to_fewer_shapes_keeps_the_lines(engines, page):
    """A recogniser batch padded to its bucket and cut back reads the same lines as the batch unpadded."""
    engine = engines["openvino"][0]
    rec = engine._load_rec_model()
    bgr = np.ascontiguousarray(page.image[..., ::-1])
    img, op = engine.preprocess_img(bgr)
    crops = engine.detect_and_crop(img, op)[0][:6]
    ratio = max(c.shape[1] / c.shape[0] for c in crops)
    batch = np.stack([rec.resize_norm_img(c, ratio) for c in crops]).astype(np.float32)
    assert B.bucket(batch.shape[3]) > batch.shape[3]  # the case padding changes
    padded = rec.session(batch)
    plain = rec.session._infer(batch, (Ellipsis,))
    assert padded.shape == plain.shape
    assert (padded.argmax(2) == plain.argmax(2)).mean() > 0.97
    assert [B.bucket(w) for w in (160, 161, 256, 257, 1000)] == [160, 192, 256, 320, 1024]
