"""``foveate store bench``: the store's database (SQLite in WAL mode) against LMDB and one file per texture.

Each backend stores the same ``count`` texture blobs (the ``.fvt`` bytes of a ``size`` x ``size`` image, made
distinct), with a SHA-256 per blob checked on every read, and the same durability: a committed write survives
the writing process being killed, not necessarily a power cut (SQLite ``synchronous=NORMAL``, LMDB
``sync=False``, files written then renamed without fsync).  Measured: write (ms per put), verified read (ms per
get, warm page cache), read latency while another process writes, and bytes on disk.  SQLite is measured
through :class:`foveate.store.TextureStore` itself; LMDB (``pip install lmdb``) and files through minimal
equivalents here.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import multiprocessing
import os
import random
import re
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rich.console import Console
from rich.table import Table

from ..core.config import EncodeConfig
from ..core.errors import ConfigError
from ..core.texture import Texture
from ..store import TextureStore, texture_blob


# -- the alternatives, minimal --------------------------------------------------------------------------------
class LmdbBackend:
    def __init__(self, path: Path, map_size: int = 64 << 30) -> None:
        import lmdb

        self.path = path
        self.env = lmdb.open(str(path), map_size=map_size, sync=False, max_readers=256, lock=True)

    def put(self, key: str, blob: bytes, digest: bytes) -> None:
        with self.env.begin(write=True) as txn:
            txn.put(key.encode(), digest + blob, overwrite=False)

    def get(self, key: str) -> bytes | None:
        with self.env.begin(buffers=True) as txn:
            val = txn.get(key.encode())
            if val is None:
                return None
            data = bytes(val[32:])
            if hashlib.sha256(data).digest() != bytes(val[:32]):
                return None
            return data

    def disk_bytes(self) -> int:
        return sum(f.stat().st_size for f in self.path.iterdir())

    def close(self) -> None:
        self.env.close()


class FilesBackend:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)

    def put(self, key: str, blob: bytes, digest: bytes) -> None:
        dest = self.path / f"{key}.fvt"
        if dest.exists():
            return
        tmp = self.path / f".{key}.{os.getpid()}.tmp"
        tmp.write_bytes(digest + blob)
        os.replace(tmp, dest)

    def get(self, key: str) -> bytes | None:
        try:
            val = (self.path / f"{key}.fvt").read_bytes()
        except FileNotFoundError:
            return None
        data = val[32:]
        return data if hashlib.sha256(data).digest() == val[:32] else None

    def disk_bytes(self) -> int:
        return sum(f.stat().st_size for f in self.path.iterdir())

    def close(self) -> None:
        pass


class SqliteBackend:
    """The real store; ``put`` takes the texture (its metadata is indexed), ``get`` returns verified bytes.
    ``page_size`` other than the store's (``sqlite-4k``: 4096) shows why the store picks its page size."""

    def __init__(self, path: Path, page_size: int | None = None) -> None:
        from ..store import sqlite as store_module

        default = store_module.PAGE_SIZE
        store_module.PAGE_SIZE = page_size or default  # read when the database file is created
        try:
            self.store = TextureStore(path)
        finally:
            store_module.PAGE_SIZE = default

    def put_texture(self, tex: Texture, blob: tuple[bytes, str]) -> None:
        self.store.put(tex, blob)

    def get(self, key: str) -> bytes | None:
        return self.store.get_bytes(key)

    def disk_bytes(self) -> int:
        return self.store.file_bytes()

    def close(self) -> None:
        self.store.close()


def _open(kind: str, path: Path):
    if kind.startswith("sqlite-") and kind.endswith("k"):
        return SqliteBackend(path, page_size=int(kind[len("sqlite-") : -1]) * 1024)
    return {"sqlite": SqliteBackend, "lmdb": LmdbBackend, "files": FilesBackend}[kind](path)


def _variants(tex: Texture, count: int) -> list[tuple[Texture, bytes, str]]:
    """``count`` textures that differ only in their content hash (so their ids and blobs differ)."""
    out = []
    for i in range(count):
        t = dataclasses.replace(tex, content_hash=hashlib.sha256(f"{tex.content_hash}{i}".encode()).hexdigest())
        blob, digest = texture_blob(t)
        out.append((t, blob, digest))
    return out


def _put(backend, item) -> None:
    """One timed put.  Every backend gets the blob's SHA-256 made in advance (``texture_blob``, as the service's
    uploads do), so no put's time includes hashing it."""
    tex, blob, digest = item
    if isinstance(backend, SqliteBackend):
        backend.put_texture(tex, (blob, digest))
    else:
        backend.put(tex.id, blob, bytes.fromhex(digest))


def _writer(kind: str, path: str, size: int, count: int, seed: int, ready) -> None:
    """Child process: write ``count`` more textures as fast as it can."""
    tex = _base_texture(size, seed)
    items = _variants(tex, count)
    backend = _open(kind, Path(path))
    ready.set()
    for item in items:
        _put(backend, item)
    backend.close()


def _base_texture(size: int, seed: int) -> Texture:
    from ..core.texture import encode_array

    rng = np.random.default_rng(seed)
    img = rng.integers(0, 256, (size, size, 3), dtype=np.uint8)
    return encode_array(img, EncodeConfig(preset="fast"), device=torch.device("cpu"))


def _ms(ts: list[float]) -> dict:
    ts = sorted(t * 1000 for t in ts)
    return {"median": round(statistics.median(ts), 3), "p99": round(ts[min(len(ts) - 1, int(0.99 * len(ts)))], 3)}


def bench_backend(kind: str, items: list, size: int, root: Path) -> dict:
    path = root / kind
    backend = _open(kind, path)
    puts = []
    for item in items:
        t0 = time.perf_counter()
        _put(backend, item)
        puts.append(time.perf_counter() - t0)
    keys = [t.id for t, _, _ in items]
    gets = []
    for key in random.Random(0).sample(keys * 3, len(keys) * 3):
        t0 = time.perf_counter()
        data = backend.get(key)
        gets.append(time.perf_counter() - t0)
        assert data is not None, f"{kind}: lost {key}"
    disk = backend.disk_bytes()
    # reads while another process writes as many textures again
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    proc = ctx.Process(target=_writer, args=(kind, str(path), size, len(items), 1, ready))
    proc.start()
    ready.wait(120)
    busy = []
    rng = random.Random(1)
    while proc.is_alive():
        key = rng.choice(keys)
        t0 = time.perf_counter()
        data = backend.get(key)
        busy.append(time.perf_counter() - t0)
        assert data is not None
    proc.join()
    backend.close()
    blob_mb = len(items[0][1]) / 2**20
    return {
        "backend": kind,
        "count": len(items),
        "blob_mib": round(blob_mb, 3),
        "put_ms": _ms(puts),
        "get_ms": _ms(gets),
        "get_ms_during_writes": _ms(busy) if busy else None,
        "reads_during_writes": len(busy),
        "write_mib_s": round(blob_mb * len(puts) / sum(puts), 1),
        "read_mib_s": round(blob_mb * len(gets) / sum(gets), 1),
        "disk_mib": round(disk / 2**20, 1),
        "disk_overhead": round(disk / (blob_mb * 2**20 * len(items)) - 1, 4),
    }


def run_store_bench(
    count: int = 40,
    size: int = 1024,
    backends: list[str] | None = None,
    json_path: Path | None = None,
    console: Console | None = None,
) -> dict:
    from ..core.device import resolve_device
    from .common import machine_info

    console = console or Console()
    backends = backends or ["sqlite", "lmdb", "files"]
    unknown = [b for b in backends if b not in ("sqlite", "lmdb", "files") and not re.fullmatch(r"sqlite-\d+k", b)]
    if unknown:
        raise ConfigError(f"unknown store backend(s) {unknown}; use sqlite, sqlite-<N>k (page size), lmdb, files")
    with console.status("encoding ..."):
        items = _variants(_base_texture(size, 0), count)
    result: dict[str, Any] = {
        "machine": machine_info(resolve_device("cpu")),
        "count": count,
        "size": size,
        "backends": [],
    }
    with tempfile.TemporaryDirectory() as tmp:
        for kind in backends:
            if kind == "lmdb":
                try:
                    import lmdb  # noqa: F401
                except ImportError:
                    console.print("lmdb not installed (pip install lmdb): skipped")
                    continue
            with console.status(f"{kind} ..."):
                result["backends"].append(bench_backend(kind, items, size, Path(tmp)))
    t = Table(
        title=f"store backends: {count} textures of a {size}x{size} image "
        f"({len(items[0][1]) / 2**20:.2f} MiB each), verified reads",
        box=None,
    )
    for col in (
        "backend",
        "put ms (p50 / p99)",
        "get ms (p50 / p99)",
        "get ms while a process writes",
        "write MiB/s",
        "read MiB/s",
        "disk overhead",
    ):
        t.add_column(col, justify="right")
    for r in result["backends"]:
        busy = r["get_ms_during_writes"]
        t.add_row(
            r["backend"],
            f"{r['put_ms']['median']:.2f} / {r['put_ms']['p99']:.2f}",
            f"{r['get_ms']['median']:.2f} / {r['get_ms']['p99']:.2f}",
            f"{busy['median']:.2f} / {busy['p99']:.2f}" if busy else "-",
            f"{r['write_mib_s']}",
            f"{r['read_mib_s']}",
            f"{r['disk_overhead'] * 100:.1f} %",
        )
    console.print(t)
    if json_path is not None:
        Path(json_path).write_text(json.dumps(result, indent=1))
        console.print(f"wrote {json_path}")
    return result
