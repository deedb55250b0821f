"""Filling a store from files (``foveate encode --store DIR IMAGES...``): folders expanded to image files, each
decoded, hashed and -- unless its texture is stored -- encoded, in a pool of threads; resumable."""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from ..core.errors import FoveateError
from ..core.io import load_image
from ..core.texture import content_hash, encode_array, texture_id
from .store import TextureStore

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".tif", ".tiff", ".bmp", ".gif", ".ppm", ".pgm", ".jp2")


def expand_images(paths: list[str | os.PathLike]) -> list[Path]:
    """Files as given; folders searched recursively for image files (by suffix), sorted; duplicates dropped."""
    out: list[Path] = []
    seen: set[Path] = set()
    for p in map(Path, paths):
        found = (
            sorted(f for f in p.rglob("*") if f.is_file() and f.suffix.lower() in IMAGE_SUFFIXES) if p.is_dir() else [p]
        )
        for f in found:
            key = f.resolve()
            if key not in seen:
                seen.add(key)
                out.append(f)
    return out


@dataclass
class IngestResult:
    path: Path
    status: str  # "encoded", "stored" (already there: skipped), "failed"
    id: str | None = None
    message: str = ""
    encode_ms: float = 0.0
    pixels: int = 0


@dataclass
class IngestSummary:
    results: list[IngestResult]
    seconds: float

    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.results)

    def to_dict(self) -> dict:
        enc = [r for r in self.results if r.status == "encoded"]
        return {
            "images": len(self.results),
            "encoded": len(enc),
            "skipped": self.count("stored"),
            "failed": self.count("failed"),
            "seconds": round(self.seconds, 3),
            "images_per_s": round(len(self.results) / self.seconds, 3) if self.seconds else None,
            # throughput of the encoding itself: images encoded (not skipped) per minute of wall time
            "encoded_per_min": round(60.0 * len(enc) / self.seconds, 2) if self.seconds else None,
            "encode_ms_median": round(statistics.median(r.encode_ms for r in enc), 1) if enc else None,
            "encoded_megapixels_per_s": round(sum(r.pixels for r in enc) / 1e6 / self.seconds, 3)
            if self.seconds
            else None,
            "failures": {str(r.path): r.message for r in self.results if r.status == "failed"},
        }


def _ingest_one(store: TextureStore, path: Path, config) -> IngestResult:
    try:
        rgb = load_image(path, max_pixels=config.max_pixels)
        chash = content_hash(rgb)
        tid = texture_id(chash, config)
        if tid in store:
            return IngestResult(path, "stored", tid)
        tex = encode_array(rgb, config, device=torch.device("cpu"), content_hash=chash)
        store.put(tex, source=path.name)
        return IngestResult(
            path, "encoded", tid, encode_ms=tex.timings_ms["total"], pixels=int(rgb.shape[0] * rgb.shape[1])
        )
    except FoveateError as exc:
        return IngestResult(path, "failed", message=str(exc))
    except Exception as exc:  # a bug or a library failure on one file must not stop a batch: record it, go on
        reason = (str(exc).strip() or type(exc).__name__).splitlines()[0][:200]
        return IngestResult(path, "failed", message=f"{path}: unexpected {type(exc).__name__}: {reason}")


def encode_into_store(
    store: TextureStore, paths: list[Path], config, workers: int | None = None, on_result=None
) -> IngestSummary:
    """Decode, hash and (unless stored) encode ``paths`` into ``store`` with ``workers`` threads.

    Resumable: an image whose texture is stored (same pixels, same config) is decoded and hashed but not
    encoded again.  At most ``2 * workers`` images are in memory at once.  ``on_result(IngestResult)`` is
    called as each finishes (progress bars).
    """
    from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

    from ..core.device import cpu_cores

    workers = workers or cpu_cores()
    results: list[IngestResult] = []
    t0 = time.perf_counter()
    todo = iter(paths)
    with ThreadPoolExecutor(workers, thread_name_prefix="foveate-ingest") as pool:
        running: set[Future[IngestResult]] = set()
        while True:
            while len(running) < 2 * workers:
                nxt = next(todo, None)
                if nxt is None:
                    break
                running.add(pool.submit(_ingest_one, store, nxt, config))
            if not running:
                break
            done, running = wait(running, return_when=FIRST_COMPLETED)
            for f in done:
                results.append(f.result())
                if on_result is not None:
                    on_result(results[-1])
    return IngestSummary(results, time.perf_counter() - t0)
