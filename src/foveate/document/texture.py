"""A document's texture: one :class:`~foveate.core.texture.Texture` per page, plus what the pages share (the kind,
the render DPI, each page's size and where its text came from), saved and loaded as one ``.fvt`` file.

The file is a safetensors file like a page's: tensor ``page.<i>`` holds page i's own ``.fvt`` bytes (uint8), and the
header's ``foveate`` metadata says ``format: foveate-document``.  A page loads exactly as a single texture does.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..channels.text.group import TEXT_LAYER_KEY
from ..core.config import EncodeConfig, replace_config
from ..core.device import resolve_device
from ..core.errors import TextureFormatError, TextureKindError
from ..core.fvt import write_file
from ..core.io import DEFAULT_MAX_PIXELS
from ..core.texture import Texture, content_hash, encode_array, texture_id
from .header import DOCUMENT_FORMAT, DOCUMENT_FORMAT_VERSION, document_meta
from .load import DEFAULT_DPI, DEFAULT_MAX_PAGES, OCR, LoadedDocument, document_kind, load_document


@dataclass
class DocumentTexture:
    """An encoded multi-page document.  Build with :func:`encode_document` (or ``foveate.encode("doc.pdf")``) or
    :meth:`DocumentTexture.load`.

    Attributes:
        pages: one texture per page, in page order (all with the same encode config).
        kind: ``pdf`` or ``tiff``.
        dpi: the PDF render resolution (``None`` for a TIFF).
        text_sources: per page, where the text group's lines came from: ``text-layer`` (the PDF's own text) or
            ``ocr``.
        timings_ms: ``load`` (decode, render, text layers) and ``total``.
    """

    pages: list[Texture]
    kind: str
    dpi: float | None = None
    text_sources: list[str] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.pages:
            raise TextureFormatError("a document texture needs at least one page")
        if len(self.text_sources) != len(self.pages):
            self.text_sources = [OCR] * len(self.pages)

    def __len__(self) -> int:
        return len(self.pages)

    @property
    def num_pages(self) -> int:
        return len(self.pages)

    @property
    def config(self) -> EncodeConfig:
        return self.pages[0].config

    @property
    def patch_size(self) -> int:
        return self.config.patch_size

    @property
    def page_sizes(self) -> list[tuple[int, int]]:
        """(H, W) of each page in pixels."""
        return [p.image_size for p in self.pages]

    @property
    def content_hash(self) -> str:
        """SHA-256 over the pages' content hashes, in order: the same pages in the same order hash the same."""
        return document_content_hash([p.content_hash for p in self.pages])

    @property
    def id(self) -> str:
        return texture_id(self.content_hash, self.config)

    # what a store's listing reads (the first page's; every page has the same layout and config)
    @property
    def image_size(self) -> tuple[int, int]:
        """(H, W) of the first page."""
        return self.pages[0].image_size

    @property
    def num_levels(self) -> int:
        return self.pages[0].num_levels

    @property
    def channels(self) -> tuple[str, ...]:
        return self.pages[0].channels

    @property
    def groups(self) -> dict[str, tuple[int, int]]:
        return self.pages[0].groups

    @property
    def absent(self) -> tuple[str, ...]:
        return self.pages[0].absent

    @property
    def device(self) -> torch.device:
        return self.pages[0].device

    def to(self, device: str | torch.device | None) -> DocumentTexture:
        for p in self.pages:
            p.to(device)
        return self

    def nbytes(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for p in self.pages:
            for k, v in p.nbytes().items():
                out[k] = out.get(k, 0) + v
        return out

    def info(self) -> dict[str, Any]:
        """What is shared across the pages, as JSON: kind, dpi, page sizes, text sources."""
        return {
            "kind": self.kind,
            "dpi": self.dpi,
            "num_pages": self.num_pages,
            "pages": [{"width": w, "height": h} for h, w in self.page_sizes],
            "text_sources": list(self.text_sources),
        }

    # -- persistence ---------------------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        from safetensors.numpy import save as st_save

        arrays = {f"page.{i}": np.frombuffer(p.to_bytes(), np.uint8) for i, p in enumerate(self.pages)}
        meta = {
            "format": DOCUMENT_FORMAT,
            "format_version": DOCUMENT_FORMAT_VERSION,
            "id": self.id,
            "timings_ms": self.timings_ms,
            **self.info(),
        }
        return st_save(arrays, metadata={"foveate": json.dumps(meta)})

    def save(self, path: str | Path) -> Path:
        """Write the document's ``.fvt`` file atomically (temporary file + rename)."""
        return write_file(path, self.to_bytes())

    @classmethod
    def load(cls, path: str | Path | bytes, device: str | torch.device | None = "cpu") -> DocumentTexture:
        if isinstance(path, (bytes, bytearray, memoryview)):
            return cls.from_bytes(bytes(path), device)
        path = Path(path)
        if not path.is_file():
            raise TextureFormatError(f"{path}: no such texture file")
        return cls.from_bytes(path.read_bytes(), device, name=str(path))

    @classmethod
    def from_bytes(
        cls, data: bytes, device: str | torch.device | None = "cpu", name: str = "<bytes>"
    ) -> DocumentTexture:
        from safetensors import SafetensorError
        from safetensors.numpy import load as st_load

        meta = document_meta(data, name)
        if meta is None:
            from ..core.fvt import read_meta

            read_meta(data, name)  # a single texture (or not a texture at all): say which
            raise TextureKindError(f"{name}: a single texture, not a document's; load it with foveate.Texture.load")
        try:
            arrays = st_load(data)
        except (SafetensorError, ValueError, OSError) as exc:
            raise TextureFormatError(f"{name}: corrupt document texture ({exc})") from exc
        try:
            n = int(meta["num_pages"])
            pages = [
                Texture.from_bytes(arrays[f"page.{i}"].tobytes(), device=device, name=f"{name} page {i + 1}")
                for i in range(n)
            ]
            doc = cls(pages, str(meta["kind"]), meta.get("dpi"), list(meta["text_sources"]), meta.get("timings_ms", {}))
        except (KeyError, TypeError, ValueError) as exc:
            raise TextureFormatError(f"{name}: incomplete document texture (missing {exc})") from exc
        if meta.get("id") != doc.id:
            raise TextureFormatError(f"{name}: the pages do not match the document's id (corrupt file)")
        return doc


def document_content_hash(page_hashes: list[str]) -> str:
    """A document's content hash from its pages' (:func:`foveate.core.texture.content_hash` of each rendered page):
    what its id is made of, known before any page is encoded."""
    h = hashlib.sha256(f"document:{len(page_hashes)}:".encode())
    for ph in page_hashes:
        h.update(ph.encode())
    return h.hexdigest()


def encode_pages(
    doc: LoadedDocument,
    config: EncodeConfig,
    device: str | torch.device | None = None,
    load_ms: float = 0.0,
) -> DocumentTexture:
    """Encode already loaded pages: each page as an image, its text layer (where it has one) in place of OCR."""
    dev = resolve_device(device)
    t0 = time.perf_counter()
    pages = []
    for page in doc.pages:
        frame = {TEXT_LAYER_KEY: page.lines} if page.lines is not None else None
        pages.append(encode_array(page.image, config, dev, frame=frame, content_hash=content_hash(page.image)))
    total = load_ms + (time.perf_counter() - t0) * 1000.0
    return DocumentTexture(
        pages, doc.kind, doc.dpi, [p.text_source for p in doc.pages], {"load": load_ms, "total": total}
    )


def encode_document(
    source: Any,
    config: EncodeConfig | None = None,
    *,
    dpi: float = DEFAULT_DPI,
    max_pages: int = DEFAULT_MAX_PAGES,
    text_layer: bool = True,
    preset: str | None = None,
    device: str | torch.device | None = None,
    **overrides: Any,
) -> DocumentTexture:
    """Encode a PDF or multi-page TIFF (path or bytes) into a :class:`DocumentTexture`.

    Args:
        dpi, max_pages, text_layer: see :func:`foveate.document.load.load_document` (the page cap is checked before
            any page is rendered).
        config, preset, overrides, device: as :func:`foveate.encode`; the pixel limit is the config's, per page.
    """
    config = config or EncodeConfig()
    if preset is not None:
        overrides["preset"] = preset
    config = replace_config(config, overrides)
    t0 = time.perf_counter()
    doc = load_document(
        source,
        dpi=dpi,
        max_pages=max_pages,
        max_pixels=config.max_pixels or DEFAULT_MAX_PIXELS,
        text_layer=text_layer,
    )
    return encode_pages(doc, config, device, load_ms=(time.perf_counter() - t0) * 1000.0)


def encode(
    source: Any,
    config: EncodeConfig | None = None,
    *,
    preset: str | None = None,
    device: str | torch.device | None = None,
    **overrides: Any,
) -> Texture | DocumentTexture:
    """``foveate.encode``: an image into a :class:`Texture` (:func:`foveate.core.texture.encode`), a PDF or
    multi-page TIFF into a :class:`DocumentTexture` (:func:`encode_document`; ``dpi``, ``max_pages`` and
    ``text_layer`` may be given as keywords)."""
    if document_kind(source) is not None:
        doc_kw = {k: overrides.pop(k) for k in ("dpi", "max_pages", "text_layer") if k in overrides}
        return encode_document(source, config, preset=preset, device=device, **doc_kw, **overrides)
    from ..core.texture import encode as encode_image

    return encode_image(source, config, preset=preset, device=device, **overrides)
