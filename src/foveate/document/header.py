"""A document texture's header, read without loading a page (and without torch: ``foveate info`` stays light):
:func:`document_meta` on the file's bytes, :func:`is_document_file` on a path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..core.errors import TextureFormatError
from ..core.fvt import DOCUMENT_FORMAT_NAME

DOCUMENT_FORMAT = DOCUMENT_FORMAT_NAME
DOCUMENT_FORMAT_VERSION = 1

__all__ = ["DOCUMENT_FORMAT", "DOCUMENT_FORMAT_VERSION", "document_meta", "is_document_file", "read_document_header"]


def document_meta(data: bytes, name: str = "<bytes>") -> dict[str, Any] | None:
    """The foveate metadata of a document texture's bytes (``None`` when they are not a document texture: a single
    texture or something else)."""
    if len(data) < 8:
        return None
    n = int.from_bytes(data[:8], "little")
    if n <= 0 or n > len(data) - 8:
        return None
    try:
        meta = json.loads(json.loads(data[8 : 8 + n])["__metadata__"]["foveate"])
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(meta, dict) or meta.get("format") != DOCUMENT_FORMAT:
        return None
    if meta.get("format_version") != DOCUMENT_FORMAT_VERSION:
        raise TextureFormatError(
            f"{name}: document texture format version {meta.get('format_version')} is not supported "
            f"(reads {DOCUMENT_FORMAT_VERSION}); encode the document again"
        )
    return meta


def is_document_file(path: str | Path) -> bool:
    """The file at ``path`` is a document texture (reads its header only)."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            n = int.from_bytes(head, "little") if len(head) == 8 else 0
            data = head + f.read(min(n, 1_000_000))
    except OSError:
        return False
    try:
        return document_meta(data, str(path)) is not None
    except TextureFormatError:
        return True


def read_document_header(path: str | Path) -> dict[str, Any] | None:
    """The foveate metadata of the document texture file at ``path`` (``None`` when it is not one)."""
    with open(path, "rb") as f:
        head = f.read(8)
        n = int.from_bytes(head, "little") if len(head) == 8 else 0
        return document_meta(head + f.read(min(n, 100_000_000)), str(path))
