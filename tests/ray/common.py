"""Shared by the dataset tests: a small corpus with bad files, and the bit-for-bit texture comparison."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from PIL import Image

from ..conftest import EXAMPLES, random_image


def corpus(folder: Path, n_random: int = 3, size: int = 96) -> dict[str, Path]:
    """``n_random`` random PNGs, the bundled photo, and three bad files: garbage, empty, a truncated JPEG."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    for i in range(n_random):
        files[f"r{i}"] = folder / f"r{i}.png"
        Image.fromarray(random_image(size, size + 16 * i, seed=100 + i)).save(files[f"r{i}"])
    files["photo"] = folder / "photo.jpg"
    shutil.copy(EXAMPLES / "photo.jpg", files["photo"])
    files["garbage"] = folder / "garbage.png"
    files["garbage"].write_bytes(b"this is not an image at all")
    files["empty"] = folder / "empty.jpg"
    files["empty"].write_bytes(b"")
    files["truncated"] = folder / "truncated.jpg"
    files["truncated"].write_bytes((EXAMPLES / "photo.jpg").read_bytes()[:2000])
    return files


BAD = ("garbage", "empty", "truncated")


def assert_same_texture(blob: bytes, local) -> None:
    """``blob`` (a dataset row's .fvt bytes) holds exactly ``local``'s texture: every tensor byte for byte, and
    the same metadata but for the encode timings (which no two runs share)."""
    from safetensors.numpy import load

    from foveate.core.texture import _read_meta

    ref = local.to_bytes()
    a, b = load(blob), load(ref)
    assert sorted(a) == sorted(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        assert a[k].tobytes() == b[k].tobytes(), f"tensor {k} differs"
    ma, mb = _read_meta(blob, "dataset"), _read_meta(ref, "local")
    for m in (ma, mb):  # encode timings, of the texture and of its extras (OCR, embeddings)
        m["timings_ms"] = sorted(m["timings_ms"])
        for extra in m["extras"].values():
            if isinstance(extra, dict) and "timings_ms" in extra:
                extra["timings_ms"] = sorted(extra["timings_ms"])
            gate = extra.get("ocr", {}).get("gate") if isinstance(extra, dict) else None
            if isinstance(gate, dict):
                gate.pop("ms", None)  # the text gate's own time
    assert json.dumps(ma, sort_keys=True) == json.dumps(mb, sort_keys=True)


def assert_one_row_per_source(rows: list[dict], sources) -> None:
    got = [r["source"] for r in rows]
    assert len(got) == len(set(got)), "a source has two rows"
    assert set(got) == {str(s) for s in sources}, "a source has no row"


def write_dataset(images: Path, out: Path, config=None) -> list[dict]:
    """Encode every image of the folder ``images`` into the dataset ``out`` with one encode worker run in this
    process (no Ray): one part.  Returns the worker's summary rows."""
    import pyarrow as pa

    from foveate.core.config import EncodeConfig
    from foveate.ray.dataset import KeySet, prepare_output, texture_manifest
    from foveate.ray.encode import EncodeWorker
    from foveate.ray.sources import expand_sources

    config = config or EncodeConfig(preset="fast")
    job = prepare_output(str(out), texture_manifest(config))
    columns: dict[str, str | None] = {"source": "source", "location": "location", "data": None}
    worker = EncodeWorker(config.to_dict(), str(out), job, columns, KeySet(), KeySet())
    pairs = expand_sources(str(images))
    batch = pa.table({"source": [s for s, _ in pairs], "location": [loc for _, loc in pairs]})
    return worker(batch).to_pylist()
