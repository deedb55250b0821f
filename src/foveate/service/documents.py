"""Documents in the service: a PDF or multi-page TIFF uploaded to ``POST /v1/textures`` is stored as one document
entry (:func:`foveate.store.put_document`), and ``select`` / ``prompt`` on its id spend one budget across its pages
(:func:`foveate.document.select_document`, :func:`foveate.document.prompt.build_document_request`).

The upload renders the pages first (in the encode pool, as an image's decode runs there), so the document's id -- its
pages' content hashes + the encode config -- is known before any encode: a document already stored answers 200 and
encodes nothing, and concurrent uploads of one document wait for its one encode (the engine's single flight, as for
images).  Decoded documents are kept in a small LRU (by count: a document is many textures)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import torch

from ..core.config import EncodeConfig
from ..core.errors import QueryError, TextureKindError
from ..core.texture import content_hash, texture_id
from ..store import StoreEntry, TextureStore

if TYPE_CHECKING:
    from ..document.load import LoadedDocument
    from ..document.select import DocumentSelection
    from ..document.texture import DocumentTexture
    from .engine import Engine

#: decoded documents the server keeps in memory (least recently used dropped first)
DOCUMENT_CACHE = 4
#: ids whose kind is remembered (cleared when full)
KNOWN_IDS = 100_000
#: the page cap of an uploaded document (``load_document``'s default), checked before any page is rendered
MAX_PAGES = 50


def is_document_upload(data: bytes) -> bool:
    """The upload is a PDF or a multi-page TIFF (by its bytes)."""
    from ..document.load import document_kind

    return document_kind(data) is not None


def render_job(data: bytes, config: EncodeConfig, max_pixels: int) -> tuple[LoadedDocument, str]:
    """Render the pages (under the page cap and the pixel limit) and name the document: (pages, its texture id --
    the pages' content hashes + the encode config).  Raises ``DocumentError`` subclasses (one line each)."""
    from ..document.load import load_document
    from ..document.texture import document_content_hash

    loaded = load_document(data, max_pages=MAX_PAGES, max_pixels=max_pixels)
    return loaded, texture_id(document_content_hash([content_hash(p.image) for p in loaded.pages]), config)


def encode_document_job(
    loaded: LoadedDocument, config: EncodeConfig, store: TextureStore | str, return_doc: bool
) -> tuple[StoreEntry, bool, DocumentTexture | None]:
    """Encode rendered pages and store them as one document entry: (entry, created, the document if
    ``return_doc``)."""
    from ..document.texture import encode_pages
    from ..store.documents import put_document
    from .engine import _worker_store

    st = _worker_store(store) if isinstance(store, str) else store
    doc = encode_pages(loaded, config, torch.device("cpu"))
    entry, created = put_document(st, doc)
    return entry, created, doc if return_doc else None


class Documents:
    """The engine's documents: upload, the decoded LRU, and which stored ids are documents (with their pages)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._docs: OrderedDict[str, DocumentTexture] = OrderedDict()
        self._pages: dict[str, int | None] = {}  # id -> pages (None: a single texture); ids never change kind
        self._lock = threading.Lock()

    async def upload(self, data: bytes) -> tuple[StoreEntry, bool, int]:
        """Render, and encode + store unless stored: (entry, created, pages).  Concurrent uploads of one document
        wait for its one encode (by its id, as images do); the work runs as its own task, so a client that goes away
        does not stop it."""
        from .engine import _retrieve

        task = asyncio.ensure_future(self._ingest(data))
        task.add_done_callback(_retrieve)
        return await asyncio.shield(task)

    async def _ingest(self, data: bytes) -> tuple[StoreEntry, bool, int]:
        e = self.engine
        loaded, tid = await e.pool.run(render_job, data, e.config, e.settings.max_pixels)
        pages = len(loaded.pages)
        task = e._inflight.get(tid)
        if task is None:
            entry = e.store.entry(tid)
            if entry is not None:
                with self._lock:
                    self._pages[tid] = pages
                return entry, False, pages
            task = asyncio.ensure_future(self._encode(tid, loaded))
            e._inflight[tid] = task
            task.add_done_callback(lambda _t: e._inflight.pop(tid, None))
            mine = True
        else:
            e.metrics.deduplicated.inc()
            mine = False
        entry, created = await asyncio.shield(task)
        return entry, created and mine, pages

    async def _encode(self, tid: str, loaded: LoadedDocument) -> tuple[StoreEntry, bool]:
        e = self.engine
        threads = e.settings.pool == "thread"
        store: TextureStore | str = e.store if threads else str(e.store.path)
        t0 = time.perf_counter()
        entry, created, doc = await e.pool.run(encode_document_job, loaded, e.config, store, threads)
        e.metrics.encodes.inc()
        e.metrics.encode_seconds.observe(time.perf_counter() - t0)
        with self._lock:
            self._pages[entry.id] = len(loaded.pages)
            if doc is not None:
                self._keep(entry.id, doc)
        return entry, created

    def _keep(self, tid: str, doc: DocumentTexture) -> None:
        self._docs[tid] = doc
        self._docs.move_to_end(tid)
        while len(self._docs) > DOCUMENT_CACHE:
            self._docs.popitem(last=False)

    def get(self, tid: str) -> DocumentTexture | None:
        """The decoded document (memory, else the store).  Blocking: call from a worker thread."""
        with self._lock:
            doc = self._docs.get(tid)
            if doc is not None:
                self._docs.move_to_end(tid)
                return doc
        from ..store.documents import get_document

        doc = get_document(self.engine.store, tid)
        if doc is not None:
            with self._lock:
                self._pages[tid] = doc.num_pages
                self._keep(tid, doc)
        return doc

    def known(self, tid: str) -> bool:
        """``tid`` is known to be a document's (uploaded or read since the start)."""
        with self._lock:
            return bool(self._pages.get(tid))

    def mark_single(self, tid: str) -> None:
        """``tid`` is a single texture's (an id is content-addressed: it never becomes a document's)."""
        with self._lock:
            if len(self._pages) >= KNOWN_IDS:
                self._pages.clear()
            self._pages.setdefault(tid, None)

    def pages(self, tid: str) -> int | None:
        """The number of pages of a stored document, ``None`` for a single texture (or no entry).  A texture in the
        engine's memory is a single one; otherwise the blob's header is read, once per id.  Blocking."""
        with self._lock:
            if tid in self._pages:
                return self._pages[tid]
        if self.engine.cache.get(tid, count=False) is not None:
            return None
        from ..document.header import document_meta

        data = self.engine.store.get_bytes(tid)
        if data is None:
            return None
        meta = document_meta(data)
        n = None if meta is None else int(meta["num_pages"])
        if n is None:
            self.mark_single(tid)
        else:
            with self._lock:
                self._pages[tid] = n
        return n

    def forget(self, tid: str) -> None:
        with self._lock:
            self._docs.pop(tid, None)
            self._pages.pop(tid, None)


def one_image_only(tid: str, pages: int) -> TextureKindError:
    """What a route that needs one image answers on a document's id."""
    return TextureKindError(
        f"texture {tid} is a document of {pages} pages: this route renders one page, give its 'page' parameter "
        f"(1-based, 1-{pages}); POST /v1/textures/{tid}/select or /prompt spend one budget across the pages"
    )


def select_across_pages(doc: DocumentTexture, body: Any, weights: Any) -> DocumentSelection:
    """One query (a select or prompt body) across a document's pages, with one budget (on one page: ``page``)."""
    from ..document.select import select_document

    page = getattr(body, "page", None)
    if page is not None and page > doc.num_pages:
        raise QueryError(f"page {page} is outside the document's {doc.num_pages} pages (1-based)")
    page0 = None if page is None else page - 1
    explain = bool(getattr(body, "explain", False))
    return select_document(
        doc, body.to_query(), body.budget, mode=body.mode, weights=weights, page=page0, explain=explain
    )


def select_document_json(doc: DocumentTexture, body: Any, weights: Any) -> bytes:
    """The schema version 2 JSON of one query across a document's pages (NaN and infinities as null, as the
    single-image route writes them)."""
    from pydantic_core import to_json

    return to_json(select_across_pages(doc, body, weights).to_dict(), inf_nan_mode="null")
