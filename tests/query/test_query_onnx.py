"""The onnxruntime query encoder against the torch model it was exported from (the reference), its cache, and
what happens when it cannot be set up."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from foveate.core.errors import ConfigError
from foveate.query.text import query_onnx as Q
from foveate.query.text.embed import _embed_query_cached, embed_query, embed_texts

TEXTS = [
    "What is the total due?",
    "Who issued it?",
    "date",
    "x",
    "",
    "   ",
    "TOTAL: $1,234.56 (incl. VAT 19%)",
    "Größe, Preis: 12,50 € — naïve café",
    "名前と住所",
    "line\nbreak\ttab",
    "word " * 400,
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
]


@pytest.fixture(scope="module")
def encoder():
    done = Q.prepare_query_encoder()  # what foveate prepare does: export once into the cache, or find it there
    assert done["status"] in ("ready", "exported"), done
    enc = Q.query_encoder()
    assert enc is not None, "the onnxruntime query encoder could not be set up here"
    return enc


def test_matches_torch(encoder):
    for t in TEXTS:
        got, want = encoder(t), embed_texts([t])[0]
        assert got.shape == (384,) and got.dtype == np.float32
        np.testing.assert_allclose(got, want, atol=Q.MAX_DIFF, err_msg=repr(t[:30]))
        assert abs(float(np.linalg.norm(got)) - 1.0) < 1e-5


def test_embed_query_uses_it(encoder):
    _embed_query_cached.cache_clear()
    q = "When was the agreement signed, and by whom?"
    np.testing.assert_array_equal(embed_query(q), encoder(q))
    np.testing.assert_allclose(embed_query(q), embed_texts([q])[0], atol=Q.MAX_DIFF)


def test_cached_export_is_reused(encoder, monkeypatch):
    monkeypatch.setattr(Q, "_export", lambda *a: pytest.fail("exported again although the cache holds one"))
    again = Q._build(Q.cache_root())
    assert again.folder == encoder.folder
    assert (again.folder / "verified.json").is_file()


def test_corrupt_cache_is_exported_again_while_lines_are_embedded(tmp_path, encoder, monkeypatch):
    """The export runs on its own copy of the network: a server exports at start, beside the first uploads' encodes,
    and the export swaps a module's parameters for traced ones while it runs -- on the shared module, every encode
    meanwhile lost its text ("RuntimeError: .numpy() is not supported for tensor subclasses")."""
    import shutil
    import threading

    root = tmp_path / "cache"
    shutil.copytree(encoder.folder.parent.parent, root)
    (root / "query-encoder" / encoder.folder.name / "model.onnx").write_bytes(b"\x00not a model")
    want = embed_texts(["Total due", "Invoice number"])
    failures: list[BaseException] = []
    embedded = []
    export = Q._export

    def export_beside_encodes(*args):
        running = threading.Event()

        def encodes():
            while not running.is_set():
                try:
                    embedded.append(np.abs(embed_texts(["Total due", "Invoice number"]) - want).max())
                except Exception as exc:  # noqa: BLE001  (what the encode would have lost)
                    failures.append(exc)
                    return

        worker = threading.Thread(target=encodes)
        worker.start()
        try:
            export(*args)
        finally:
            running.set()
            worker.join()

    monkeypatch.setattr(Q, "_export", export_beside_encodes)
    rebuilt = Q._build(root)
    assert not failures and embedded and max(embedded) < 1e-6, (failures[:1], len(embedded))
    np.testing.assert_allclose(rebuilt("What is the total?"), encoder("What is the total?"), atol=1e-6)


def test_choice(monkeypatch, tmp_path, caplog):
    """A question never exports: without a prepared encoder ``auto`` embeds with torch and says how to prepare one;
    ``foveate prepare`` reports an export that cannot run instead of raising; ``onnx`` exports on demand or fails."""

    def broken(*a):
        raise RuntimeError("no exporter here")

    monkeypatch.setenv("FOVEATE_CACHE", str(tmp_path))
    monkeypatch.setattr(Q, "_export", broken)
    try:
        monkeypatch.setenv("FOVEATE_QUERY_ENCODER", "torch")
        Q._query_encoder.cache_clear()
        assert Q.query_encoder() is None
        assert Q.prepare_query_encoder()["status"] == "skipped"
        monkeypatch.setenv("FOVEATE_QUERY_ENCODER", "sometimes")
        Q._query_encoder.cache_clear()
        with pytest.raises(ConfigError, match="FOVEATE_QUERY_ENCODER"):
            Q.query_encoder()
        monkeypatch.setenv("FOVEATE_QUERY_ENCODER", "onnx")
        Q._query_encoder.cache_clear()
        with pytest.raises(ConfigError, match="no exporter here"):
            Q.query_encoder()
        monkeypatch.setenv("FOVEATE_QUERY_ENCODER", "auto")
        Q._query_encoder.cache_clear()
        with caplog.at_level(logging.INFO, logger="foveate.query"):
            assert Q.query_encoder() is None  # nothing prepared: torch, and how to prepare
        assert "foveate prepare" in caplog.text
        done = Q.prepare_query_encoder()
        assert done["status"] == "skipped" and "no exporter here" in done["reason"]
        assert not list((tmp_path / "query-encoder").glob(".export-*"))  # the failed export left nothing behind
        _embed_query_cached.cache_clear()
        np.testing.assert_allclose(embed_query("What is the total?"), embed_texts(["What is the total?"])[0], atol=1e-6)
    finally:
        Q._query_encoder.cache_clear()
        _embed_query_cached.cache_clear()


def test_a_question_never_exports(monkeypatch, tmp_path):
    """With nothing prepared, the first question is embedded by torch at once: the export runs only in
    ``foveate prepare`` (or with ``FOVEATE_QUERY_ENCODER=onnx``)."""
    monkeypatch.setenv("FOVEATE_CACHE", str(tmp_path))
    monkeypatch.setenv("FOVEATE_QUERY_ENCODER", "auto")
    monkeypatch.setattr(Q, "_export", lambda *a: pytest.fail("a question exported the encoder"))
    try:
        Q._query_encoder.cache_clear()
        _embed_query_cached.cache_clear()
        np.testing.assert_allclose(embed_query("Who signed it?"), embed_texts(["Who signed it?"])[0], atol=1e-6)
        assert not (tmp_path / "query-encoder").exists()
    finally:
        Q._query_encoder.cache_clear()
        _embed_query_cached.cache_clear()
