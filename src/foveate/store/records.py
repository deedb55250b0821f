"""What a store row holds and what a store counts: :class:`StoreEntry` (one texture's metadata, no pixels;
:class:`DamagedRecord` when a row's metadata cannot be read), :class:`StoreCounters` (this process's hits, misses,
puts ...), :class:`GcReport`, :func:`texture_blob` (the bytes a row keeps) and :func:`file_name` (what it records of
its source).  The store itself is :mod:`.store`."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..core.texture import Texture

_COLUMNS = (
    "id, format_version, content_hash, config_hash, preset, width, height, levels, meta, encode_ms, size, "
    "created, last_access"
)


class DamagedRecord(Exception):
    """A row whose metadata (the ``meta`` JSON) cannot be read.  The store treats it as it treats a corrupt blob:
    a read drops it, a put replaces it, a listing skips it (``gc`` drops it)."""


@dataclass(frozen=True)
class StoreEntry:
    """One stored texture's metadata (no pixels, no features)."""

    id: str
    format_version: int
    content_hash: str
    config_hash: str
    preset: str
    width: int
    height: int
    levels: int
    channels: tuple[str, ...]
    absent: tuple[str, ...]
    encode_ms: float
    size: int
    created: float
    last_access: float
    #: the file name of the image it was encoded from (``None``: encoded from an array, or stored by a foveate that
    #: did not record it)
    source: str | None = None

    @classmethod
    def _from_row(cls, row: tuple) -> StoreEntry:
        """The entry of a row of :data:`_COLUMNS`; :class:`DamagedRecord` when its metadata cannot be read."""
        try:
            meta = json.loads(row[8])
            if not isinstance(meta, dict):
                raise TypeError(f"a JSON {type(meta).__name__}, not an object")
            return cls(
                id=row[0],
                format_version=row[1],
                content_hash=row[2],
                config_hash=row[3],
                preset=row[4],
                width=row[5],
                height=row[6],
                levels=row[7],
                channels=tuple(meta["channels"]),
                absent=tuple(meta["absent"]),
                encode_ms=row[9],
                size=row[10],
                created=row[11],
                last_access=row[12],
                source=meta.get("source"),
            )
        except (ValueError, TypeError, KeyError) as exc:  # not JSON, not an object, a key missing
            raise DamagedRecord(f"texture {row[0]}: unreadable metadata ({type(exc).__name__}: {exc})") from exc

    def to_dict(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


@dataclass
class StoreCounters:
    """What this process did with the store (for ``/metrics``)."""

    hits: int = 0
    misses: int = 0
    puts: int = 0
    duplicates: int = 0
    evictions: int = 0
    corrupt: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, **deltas: int) -> None:
        with self._lock:
            for k, v in deltas.items():
                setattr(self, k, getattr(self, k) + v)

    def to_dict(self) -> dict[str, int]:
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}


@dataclass
class GcReport:
    other_versions: int = 0
    corrupt: int = 0
    evicted: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    file_bytes_before: int = 0
    file_bytes_after: int = 0


def file_name(source: str | os.PathLike | None) -> str | None:
    """The file name of a path or URI (``scans/p 1.png``, ``s3://bucket/p 1.png`` -> ``p 1.png``): what a store
    records of where a texture came from, never a machine's path.  ``None`` when there is no name."""
    if source is None:
        return None
    return os.fspath(source).replace("\\", "/").rstrip("/").rpartition("/")[2] or None


def texture_blob(texture: Texture) -> tuple[bytes, str]:
    """The bytes a store keeps for ``texture`` and their SHA-256."""
    blob = texture.to_bytes()
    return blob, hashlib.sha256(blob).hexdigest()
