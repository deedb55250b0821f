"""The gateway's encode cache: a picture is encoded once, whoever asks about it and however often.

* by the bytes the client sent: the SHA-256 of the base64 text -> the texture id, so a picture sent again (the next
  turn of a conversation) is neither decoded nor hashed again;
* by content: the texture id is the content hash of the decoded pixels plus the encode config (the store's key), so
  the same picture in PNG and in WebP, or from another gateway or ``foveate serve`` on the same store, is one texture;
* in memory (:class:`~foveate.service.engine.TextureCache`, least recently used dropped first), then in the store;
* single flight: concurrent requests on a picture being encoded wait for that one encode.

The decode and the encode run in a thread pool, never on the event loop.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import torch

from ..core.config import EncodeConfig
from ..core.io import load_image
from ..core.texture import Texture, content_hash, encode_array, texture_id
from ..service.engine import TextureCache
from ..store import TextureStore

#: bytes-hash -> texture id entries kept (a few hundred bytes each)
MAX_KNOWN = 4096


@dataclass(frozen=True)
class Encoded:
    """A picture's texture, and whether it was found (``hit``) or encoded for this request."""

    texture: Texture
    hit: bool


class EncodeCache:
    """Texture of a picture given as base64 text: memory, store, or one encode shared by every waiting request."""

    def __init__(
        self,
        store: TextureStore,
        config: EncodeConfig,
        workers: int = 2,
        cache_bytes: int = 512 * 2**20,
        max_pixels: int = 25_000_000,
        torch_threads: int = 1,
        on_encode: Callable[[], object] | None = None,
    ) -> None:
        self.on_encode = on_encode
        self.store = store
        self.config = config
        self.max_pixels = max_pixels
        self.memory = TextureCache(cache_bytes)
        self.executor = ThreadPoolExecutor(
            workers, thread_name_prefix="foveate-gateway", initializer=torch.set_num_threads, initargs=(torch_threads,)
        )
        self._known: OrderedDict[str, str] = OrderedDict()
        self._known_lock = threading.Lock()
        self._inflight: dict[str, asyncio.Future] = {}
        self.encodes = 0  # encodes run by this cache (the tests count them)
        self.encode_seconds = 0.0

    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)

    async def run(self, fn, *args):
        """``fn(*args)`` in the cache's thread pool."""
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    def _remember(self, key: str, tid: str) -> None:
        with self._known_lock:
            self._known[key] = tid
            self._known.move_to_end(key)
            while len(self._known) > MAX_KNOWN:
                self._known.popitem(last=False)

    def _lookup(self, tid: str) -> Texture | None:
        """Memory, else the store (then kept in memory).  Blocking."""
        tex = self.memory.get(tid)
        if tex is None:
            tex = self.store.get(tid)
            if tex is not None:
                self.memory.put(tid, tex)
        return tex

    def _decode(self, data: bytes) -> tuple[np.ndarray, str]:
        """Picture bytes -> (RGB array, content hash).  Blocking."""
        rgb = load_image(data, max_pixels=self.max_pixels)
        return rgb, content_hash(rgb)

    def _encode(self, rgb: np.ndarray, chash: str, tid: str) -> Texture:
        t0 = time.perf_counter()
        tex = encode_array(rgb, self.config, device=torch.device("cpu"), content_hash=chash)
        self.store.put(tex)
        self.memory.put(tid, tex)
        self.encodes += 1
        self.encode_seconds += time.perf_counter() - t0
        if self.on_encode is not None:
            self.on_encode()
        return tex

    async def texture(self, b64: str, raw: bytes) -> Encoded:
        """The texture of the picture ``raw`` (decoded bytes of the base64 text ``b64``).  Raises ``ImageError``
        subclasses for bytes that are no picture or a picture over ``max_pixels``."""
        key = hashlib.sha256(b64.encode("ascii", "replace")).hexdigest()
        with self._known_lock:
            tid = self._known.get(key)
        if tid is not None and tid not in self._inflight:
            tex = self.memory.get(tid)
            if tex is not None:  # the common hit: no decode, no hash, no thread hop
                return Encoded(tex, True)
        rgb, chash = await self.run(self._decode, raw)
        tid = texture_id(chash, self.config)
        self._remember(key, tid)
        task = self._inflight.get(tid)
        if task is None:
            tex = await self.run(self._lookup, tid)
            if tex is not None:
                return Encoded(tex, True)
            task = self._inflight.get(tid)  # another request may have started it meanwhile
        if task is None:
            task = asyncio.ensure_future(self.run(self._encode, rgb, chash, tid))
            self._inflight[tid] = task
            task.add_done_callback(lambda _t: self._inflight.pop(tid, None))
            task.add_done_callback(_retrieve)
        return Encoded(await asyncio.shield(task), False)


def _retrieve(task: asyncio.Future) -> None:
    """Mark a detached task's exception as seen (the requests waiting on it heard of it)."""
    if not task.cancelled():
        task.exception()
