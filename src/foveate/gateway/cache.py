"""The gateway's encode cache: a picture is encoded once, whoever asks about it and however often.

* by the bytes the client sent: the SHA-256 of the base64 text -> the texture id, so a picture sent again (the next
  turn of a conversation) is neither decoded nor hashed again;
* by content: the texture id is the content hash of the decoded pixels plus the encode config (the store's key), so
  the same picture in PNG and in WebP, or from another gateway or ``foveate serve`` on the same store, is one texture;
* in memory (:class:`~foveate.service.engine.TextureCache`, least recently used dropped first), then in the store;
* single flight: concurrent requests on a picture being encoded wait for that one encode.

A PDF (:meth:`EncodeCache.document`) is cached the same way: by its bytes, then by content (its id is made of its
rendered pages' content hashes, :func:`foveate.document.texture.document_content_hash`), in a small memory LRU of
documents (by count), then in the store as one document entry, else rendered and encoded once.

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
from ..document.load import DEFAULT_DPI, DEFAULT_MAX_PAGES, LoadedDocument, load_document
from ..document.texture import DocumentTexture, document_content_hash, encode_pages
from ..service.engine import TextureCache
from ..store import TextureStore
from ..store.documents import get_document, put_document

#: bytes-hash -> texture id entries kept (a few hundred bytes each)
MAX_KNOWN = 4096
#: decoded documents kept in memory (least recently used dropped first; a document is many textures)
MAX_DOCUMENTS = 8


@dataclass(frozen=True)
class Encoded:
    """A picture's texture (a PDF's :class:`~foveate.document.DocumentTexture`), and whether it was found
    (``hit``) or encoded for this request."""

    texture: Texture | DocumentTexture
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
        max_pages: int = DEFAULT_MAX_PAGES,
    ) -> None:
        self.on_encode = on_encode
        self.store = store
        self.config = config
        self.max_pixels = max_pixels
        self.memory = TextureCache(cache_bytes)
        self.documents: OrderedDict[str, DocumentTexture] = OrderedDict()
        self.max_pages = max_pages
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
        return await self._once(tid, self._lookup, self._encode, rgb, chash, tid)

    async def document(self, b64: str, raw: bytes) -> Encoded:
        """The :class:`DocumentTexture` of the PDF ``raw`` (decoded bytes of the base64 text ``b64``): rendered at
        the default dpi under the page cap.  Raises ``DocumentError`` subclasses (corrupt, encrypted, empty, too many
        pages) and ``ImageTooLargeError`` (a page over ``max_pixels``)."""
        key = "document:" + hashlib.sha256(b64.encode("ascii", "replace")).hexdigest()
        with self._known_lock:
            tid = self._known.get(key)
        if tid is not None and tid not in self._inflight:
            with self._known_lock:
                doc = self.documents.get(tid)
            if doc is not None:
                return Encoded(doc, True)
        loaded, chash = await self.run(self._render, raw)
        tid = texture_id(chash, self.config)
        self._remember(key, tid)
        return await self._once(tid, self._lookup_document, self._encode_document, loaded, tid)

    async def _once(self, tid: str, lookup, encode, *args) -> Encoded:
        """The texture ``tid`` from memory or the store (``lookup``), else from the one ``encode(*args)`` that every
        request asking for ``tid`` meanwhile waits on."""
        task = self._inflight.get(tid)
        if task is None:
            tex = await self.run(lookup, tid)
            if tex is not None:
                return Encoded(tex, True)
            task = self._inflight.get(tid)  # another request may have started it meanwhile
        if task is None:
            task = asyncio.ensure_future(self.run(encode, *args))
            self._inflight[tid] = task
            task.add_done_callback(lambda _t: self._inflight.pop(tid, None))
            task.add_done_callback(_retrieve)
        return Encoded(await asyncio.shield(task), False)

    # -- documents ----------------------------------------------------------------------------------------------
    def _render(self, data: bytes) -> tuple[LoadedDocument, str]:
        """PDF bytes -> (rendered pages, the document's content hash).  Blocking."""
        loaded = load_document(data, dpi=DEFAULT_DPI, max_pages=self.max_pages, max_pixels=self.max_pixels)
        return loaded, document_content_hash([content_hash(p.image) for p in loaded.pages])

    def _keep_document(self, tid: str, doc: DocumentTexture) -> None:
        with self._known_lock:
            self.documents[tid] = doc
            self.documents.move_to_end(tid)
            while len(self.documents) > MAX_DOCUMENTS:
                self.documents.popitem(last=False)

    def _lookup_document(self, tid: str) -> DocumentTexture | None:
        """Memory, else the store (then kept in memory).  Blocking."""
        with self._known_lock:
            doc = self.documents.get(tid)
            if doc is not None:
                self.documents.move_to_end(tid)
                return doc
        doc = get_document(self.store, tid)
        if doc is not None:
            self._keep_document(tid, doc)
        return doc

    def _encode_document(self, loaded: LoadedDocument, tid: str) -> DocumentTexture:
        t0 = time.perf_counter()
        doc = encode_pages(loaded, self.config, torch.device("cpu"))
        put_document(self.store, doc)
        self._keep_document(tid, doc)
        self.encodes += 1
        self.encode_seconds += time.perf_counter() - t0
        if self.on_encode is not None:
            self.on_encode()
        return doc


def _retrieve(task: asyncio.Future) -> None:
    """Mark a detached task's exception as seen (the requests waiting on it heard of it)."""
    if not task.cancelled():
        task.exception()
