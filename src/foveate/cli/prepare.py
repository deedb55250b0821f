"""``foveate prepare``: set a machine up once, so that no user's first question pays for it."""

from __future__ import annotations

import json
import time

import typer

from .common import app, err, out


@app.command()
def prepare(json_out: bool = typer.Option(False, "--json", help="Print what was done as JSON.")) -> None:
    """Load the bundled models once (OCR, MiniLM) and export the question encoder to onnxruntime into the cache
    ($FOVEATE_CACHE, default ~/.cache/foveate): ~2.5x faster new questions, verified against torch.  Run once after
    installing (make setup does); needs the 'onnx' extra for the export, and works offline."""
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
    if json_out:
        out.print_json(json.dumps(done))
    elif encoder["status"] == "skipped":
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
