"""``foveate prepare``: set a machine up once, so that no user's first question pays for it."""

from __future__ import annotations

import json
import time

import typer

from ..core.errors import ConfigError
from .common import app, err, out


@app.command()
def prepare(
    json_out: bool = typer.Option(False, "--json", help="Print what was done as JSON."),
    int8: bool = typer.Option(
        False,
        "--int8",
        help="Also make the int8 text recogniser (once; ~1.7x as fast on OpenVINO) that encodes use with "
        "--recogniser int8. It reads some lines differently from the float model the shipped weights were fit on.",
    ),
) -> None:
    """Load the bundled models once (OCR, MiniLM) and export the question encoder to onnxruntime into the cache
    ($FOVEATE_CACHE, default ~/.cache/foveate): ~2.5x faster new questions, verified against torch.  Run once after
    installing (make setup does); needs the 'onnx' extra for the export (and for --int8), and works offline."""
    from ..channels.text.embed import text_embedder
    from ..channels.text.ocr import ocr_engine
    from ..query.text.query_onnx import prepare_query_encoder

    done: dict[str, object] = {}
    t0 = time.perf_counter()
    ocr_engine()
    done["ocr"] = {"status": "ready", "seconds": round(time.perf_counter() - t0, 2)}
    t0 = time.perf_counter()
    text_embedder()
    done["minilm"] = {"status": "ready", "seconds": round(time.perf_counter() - t0, 2)}
    if not json_out:
        err.print("OCR and MiniLM models: ready (they ship inside their wheels)", highlight=False)
        err.print(
            "question encoder: exporting MiniLM to onnxruntime and checking it against torch (once, ~10 s) ...",
            highlight=False,
        )
    t0 = time.perf_counter()
    encoder = prepare_query_encoder()
    done["question_encoder"] = {**encoder, "seconds": round(time.perf_counter() - t0, 2)}
    _say_encoder(encoder, json_out)
    if int8:
        t0 = time.perf_counter()
        done["int8_recogniser"] = {**_int8_recogniser(json_out), "seconds": round(time.perf_counter() - t0, 2)}
    if json_out:
        out.print_json(json.dumps(done))


def _say_encoder(encoder: dict, quiet: bool) -> None:
    if quiet:
        return
    if encoder["status"] == "skipped":
        err.print(
            f"question encoder: skipped ({encoder['reason']}); questions are embedded by torch. For the faster "
            "encoder: pip install 'foveate[onnx]', then foveate prepare",
            highlight=False,
            markup=False,
        )
    else:
        err.print(
            f"question encoder: {encoder['status']} in {encoder['folder']} (largest difference from torch "
            f"{encoder['max_abs_diff']:.1g})",
            highlight=False,
            markup=False,
        )


def _int8_recogniser(quiet: bool) -> dict[str, object]:
    """Make the int8 recogniser from generated pages where none was made from the float model rapidocr loads
    (:mod:`foveate.channels.text.quantize`); a one-line error without the 'onnx' extra."""
    from ..channels.text.backend import int8_path, int8_recogniser
    from ..channels.text.ocr import ocr_engine
    from ..channels.text.quantize import generated_pages, quantize_recogniser

    if int8_recogniser(ocr_engine()) is not None:
        if not quiet:
            err.print(f"int8 recogniser: present ({int8_path()})", highlight=False, markup=False)
        return {"status": "present", "path": str(int8_path())}
    try:
        import onnx  # noqa: F401
    except ImportError:
        raise ConfigError("--int8: the int8 recogniser needs the 'onnx' extra: pip install 'foveate[onnx]'") from None
    if not quiet:
        err.print("int8 recogniser: quantizing the float one on generated pages (once, ~30 s) ...", highlight=False)
    record = quantize_recogniser(generated_pages(), int8_path())
    if not quiet:
        err.print(
            f"int8 recogniser: made in {int8_path()} ({record['calibration_lines']} calibration lines)",
            highlight=False,
            markup=False,
        )
    return {"status": "made", "path": str(int8_path()), "calibration_lines": record["calibration_lines"]}
