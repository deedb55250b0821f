"""What the HTTP routes call: a bounded encode pool, the store, and an in-memory LRU of decoded textures.

* **EncodePool** -- ``workers`` threads (or processes) plus ``queue`` waiting jobs; one more job raises
  :class:`Busy` at once (the route answers 503 with Retry-After) instead of queueing without bound.
* **TextureCache** -- decoded textures, bounded in bytes, least recently used dropped first, with their
  derived caches (flat features, pixel pyramid) built once, so a select reads no blob and builds nothing.
* **Engine.upload** -- decode and hash in the pool, then encode at most once per texture id: concurrent
  uploads of the same picture wait on the same encode (single flight); the result is stored before anyone
  hears of it.  The encode runs as its own task, so a client that times out or disconnects does not cancel it.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any

import numpy as np
import torch

from ..core.config import EncodeConfig
from ..core.errors import ImageDecodeError, UnsupportedInputError
from ..core.io import load_image
from ..core.texture import Texture, content_hash, encode_array, texture_id
from ..store import StoreEntry, TextureStore
from ..weights import Weights, load_weights
from .metrics import Metrics
from .settings import ServiceSettings


class Busy(Exception):
    """The encode queue is full."""

    def __init__(self, retry_after: int) -> None:
        super().__init__("the encode queue is full")
        self.retry_after = retry_after


# ----------------------------------------------------------------------------------------------------------
# Jobs (module-level functions: they run in worker threads or worker processes)

_worker_stores: dict[str, TextureStore] = {}
_worker_lock = threading.Lock()


def _worker_store(path: str) -> TextureStore:
    with _worker_lock:
        if path not in _worker_stores:
            _worker_stores[path] = TextureStore(path)
        return _worker_stores[path]


#: seconds between a process worker's checks that its server is still alive
PARENT_CHECK_S = 1.0


def _exit_with_parent(parent: int) -> None:
    """End this worker once its server is gone.  A server killed without a shutdown (SIGKILL, a crash) leaves its
    workers waiting forever on a queue whose other ends they hold themselves: they would live on, ~250 MB each."""
    while os.getppid() == parent:
        time.sleep(PARENT_CHECK_S)
    os._exit(0)


def _warm_worker(torch_threads: int) -> None:
    """Process workers: exit with the server, then import and run the encoder once, so the first real job does not
    pay for it."""
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), name="foveate-parent-watch", daemon=True).start()
    torch.set_num_threads(torch_threads)
    encode_array(np.zeros((64, 64, 3), np.uint8), EncodeConfig(preset="fast"), device=torch.device("cpu"))


def decode_job(data: bytes, max_pixels: int) -> tuple[np.ndarray, str]:
    """Encoded image bytes -> (RGB array, content hash).  Raises ``ImageError`` subclasses."""
    try:
        rgb = load_image(data, max_pixels=max_pixels)
    except (ImageDecodeError, UnsupportedInputError) as exc:
        raise type(exc)(f"{str(exc).removeprefix('<bytes>: ')}; upload PNG, JPEG, WebP, TIFF or BMP bytes") from None
    return rgb, content_hash(rgb)


def encode_job(
    rgb: np.ndarray, chash: str, config: EncodeConfig, store: TextureStore | str, return_texture: bool
) -> tuple[StoreEntry, bool, Texture | None]:
    """Encode, serialise and store one image (``chash``: its content hash, from :func:`decode_job`); returns
    (entry, created, texture if ``return_texture``).  ``store`` is the server's store (thread workers) or its
    path (process workers open their own)."""
    tex = encode_array(rgb, config, device=torch.device("cpu"), content_hash=chash)
    store = _worker_store(store) if isinstance(store, str) else store
    entry, created = store.put(tex)
    return entry, created, tex if return_texture else None


def _retrieve(task: asyncio.Future) -> None:
    """Mark a detached task's exception as seen (its awaiting request may have gone; the error was answered)."""
    if not task.cancelled():
        task.exception()


class EncodePool:
    """A bounded pool: at most ``workers`` running and ``queue`` waiting jobs."""

    def __init__(self, kind: str, workers: int, queue: int, retry_after: int, torch_threads: int = 1) -> None:
        self.kind = kind
        self.workers = workers
        self.capacity = workers + queue
        self.retry_after = retry_after
        self._pending = 0
        self._lock = threading.Lock()
        if kind == "process":
            import multiprocessing

            # spawn, not fork: the server process has threads (torch, the event loop) that fork would copy
            self.executor: Executor = ProcessPoolExecutor(
                workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_warm_worker,
                initargs=(torch_threads,),
            )
        else:
            self.executor = ThreadPoolExecutor(workers, thread_name_prefix="foveate-encode")

    @property
    def pending(self) -> int:
        """Jobs submitted and not finished (running + waiting)."""
        return self._pending

    async def run(self, fn: Callable, *args: Any) -> Any:
        with self._lock:
            if self._pending >= self.capacity:
                raise Busy(self.retry_after)
            self._pending += 1
        try:
            fut = self.executor.submit(fn, *args)
        except BaseException:
            self._done(None)
            raise
        fut.add_done_callback(self._done)  # counts down when the job ends, even if the caller gave up waiting
        return await asyncio.wrap_future(fut)

    def _done(self, _fut) -> None:
        with self._lock:
            self._pending -= 1

    def shutdown(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)


# ----------------------------------------------------------------------------------------------------------
# Decoded textures in memory


def resident_bytes(tex: Texture) -> int:
    """Memory a warmed texture holds: stored parts + flat features + pixel pyramid + the scorer's channel product
    that its first select keeps (``core.texture.CHANNEL_TERMS``: 3 float32 per tile)."""
    flat, _ = tex.flat_features()
    pyr = tex.pixel_levels()
    return (
        sum(tex.nbytes().values())
        + flat.numel() * flat.element_size()
        + sum(p.nbytes for p in pyr[1:])
        + flat.shape[0] * 3 * 4
    )


class TextureCache:
    """Least-recently-used map texture id -> warmed :class:`Texture`, bounded by ``max_bytes``."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[str, tuple[Texture, int]] = OrderedDict()
        self._lock = threading.Lock()
        self.bytes = 0
        self.hits = 0
        self.misses = 0

    def get(self, tid: str, count: bool = True) -> Texture | None:
        with self._lock:
            item = self._items.get(tid)
            if item is None:
                self.misses += count
                return None
            self._items.move_to_end(tid)
            self.hits += count
            return item[0]

    def put(self, tid: str, tex: Texture) -> None:
        """Add a texture (building its derived caches first, outside the lock)."""
        size = resident_bytes(tex)
        with self._lock:
            if tid in self._items:
                return
            if size > self.max_bytes:
                return  # bigger than the whole cache: serve it, do not keep it
            self._items[tid] = (tex, size)
            self.bytes += size
            while self.bytes > self.max_bytes:
                _, (_, s) = self._items.popitem(last=False)
                self.bytes -= s

    def discard(self, tid: str) -> None:
        with self._lock:
            item = self._items.pop(tid, None)
            if item is not None:
                self.bytes -= item[1]

    def __len__(self) -> int:
        return len(self._items)


# ----------------------------------------------------------------------------------------------------------
# The engine


def _warm_query_encoder() -> None:
    """Prepare the question's MiniLM encoder beside the start (``foveate prepare``'s onnxruntime export, once per
    machine: 7-17 s on 2 cores the first time), so that no question waits for it; a question that arrives meanwhile
    waits for the same setup."""
    import logging

    from ..query.text.query_onnx import prepare_query_encoder, query_encoder

    log = logging.getLogger("foveate.service")
    try:
        done = prepare_query_encoder()
        if done["status"] == "exported":
            log.info("query encoder: exported to onnxruntime once, in %s", done["folder"])
        query_encoder()
    except Exception as exc:  # FOVEATE_QUERY_ENCODER=onnx that cannot be set up: the first question says so too
        log.warning("query encoder: %s", exc)


class Engine:
    """Store + encode pool + texture cache + the relevance weights, as the routes use them.

    ``weights`` is the server's ``--weights`` resolved once, at start (``load_weights(settings.weights)`` when not
    given): every route that selects passes this object to ``select``, never the setting's string."""

    def __init__(self, settings: ServiceSettings, metrics: Metrics, weights: Weights | None = None) -> None:
        self.settings = settings
        self.metrics = metrics
        self.weights = load_weights(settings.weights) if weights is None else weights
        self.config = EncodeConfig(preset=settings.preset, max_pixels=settings.max_pixels)
        from ..channels.registry import resolve_groups

        groups = resolve_groups(self.config)  # an unknown preset fails at start, not at the first upload
        if "text" in groups:  # text questions will come: export or load the query encoder now, not at the first one
            threading.Thread(target=_warm_query_encoder, name="foveate-query-encoder", daemon=True).start()
        max_bytes = None if settings.store_max_mb is None else int(settings.store_max_mb * 2**20)
        self.store = TextureStore(settings.store, max_bytes=max_bytes)
        self.pool = EncodePool(
            settings.pool, settings.workers, settings.queue, settings.retry_after, settings.torch_threads
        )
        self.cache = TextureCache(int(settings.cache_mb * 2**20))
        self._inflight: dict[str, asyncio.Future] = {}
        self._load_locks: dict[str, threading.Lock] = {}
        self._load_lock = threading.Lock()
        from .documents import Documents

        self.documents = Documents(self)  # PDFs and multi-page TIFFs: one entry each, one budget across pages
        metrics.attach(self)

    def close(self) -> None:
        self.metrics.detach()
        self.pool.shutdown()
        self.store.close()

    @property
    def encodes_in_progress(self) -> int:
        return len(self._inflight)

    async def upload(self, data: bytes) -> tuple[StoreEntry, bool]:
        """Decode, hash, and encode + store unless stored.  Returns (entry, created).

        The work runs as its own task: a client that times out or disconnects does not stop it, so the
        texture still lands in the store (and the client's retry answers 200)."""
        task = asyncio.ensure_future(self._ingest(data))
        task.add_done_callback(_retrieve)
        return await asyncio.shield(task)

    async def _ingest(self, data: bytes) -> tuple[StoreEntry, bool]:
        rgb, chash = await self.pool.run(decode_job, data, self.settings.max_pixels)
        tid = texture_id(chash, self.config)
        task = self._inflight.get(tid)
        if task is None:
            entry = self.store.entry(tid)  # an indexed read of a few columns; WAL readers never wait
            if entry is not None:
                return entry, False
            task = asyncio.ensure_future(self._encode(tid, rgb, chash))
            self._inflight[tid] = task
            task.add_done_callback(lambda _t: self._inflight.pop(tid, None))
            mine = True
        else:
            self.metrics.deduplicated.inc()
            mine = False
        entry, created = await asyncio.shield(task)
        return entry, created and mine

    async def _encode(self, tid: str, rgb: np.ndarray, chash: str) -> tuple[StoreEntry, bool]:
        t0 = time.perf_counter()
        threads = self.settings.pool == "thread"
        entry, created, tex = await self.pool.run(
            encode_job, rgb, chash, self.config, self.store if threads else str(self.store.path), threads
        )
        self.metrics.encodes.inc()
        self.metrics.encode_seconds.observe(time.perf_counter() - t0)
        if tex is not None:
            await asyncio.to_thread(self.cache.put, tid, tex)
        return entry, created

    def texture(self, tid: str) -> Texture | None:
        """The decoded texture from memory, else from the store (then kept in memory).  Blocking: call from a
        worker thread.  Concurrent misses on one id read the store once."""
        tex = self.cache.get(tid)
        if tex is not None:
            return tex
        with self._load_lock:
            lock = self._load_locks.setdefault(tid, threading.Lock())
        with lock:
            tex = self.cache.get(tid, count=False)
            if tex is None:
                tex = self.store.get(tid)
                if tex is not None:
                    self.cache.put(tid, tex)
        with self._load_lock:
            self._load_locks.pop(tid, None)
        return tex

    def delete(self, tid: str) -> bool:
        self.cache.discard(tid)
        self.documents.forget(tid)
        return self.store.delete(tid)
