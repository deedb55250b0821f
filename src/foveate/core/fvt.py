"""The ``.fvt`` container: a safetensors file (pixels, mips, coverage, stored arrays) whose header carries foveate's
JSON metadata.  Reading the header needs neither torch nor the tensors: :func:`read_header` is what ``foveate
info`` and the store's listings use; :class:`foveate.core.texture.Texture` reads and writes whole files.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import ops
from .config import EncodeConfig
from .errors import TextureFormatError, TextureKindError

FORMAT_NAME = "foveate-texture"
FORMAT_VERSION = 1
#: the format name of a document's texture (:mod:`foveate.document.texture`), refused here with a
#: :class:`TextureKindError`
DOCUMENT_FORMAT_NAME = "foveate-document"

_MAX_HEADER = 100_000_000
_ITEMSIZE = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F16": 2,
    "BF16": 2,
    "I16": 2,
    "U16": 2,
    "F32": 4,
    "I32": 4,
    "U32": 4,
    "F64": 8,
    "I64": 8,
    "U64": 8,
}


def _header(data: bytes, name: str, size: int | None = None) -> dict[str, Any]:
    """The safetensors JSON header of ``data`` (which may hold only the file's first bytes; ``size``: the file's)."""
    size = len(data) if size is None else size
    if size < 8 or len(data) < 8:
        raise TextureFormatError(f"{name}: not a foveate texture (file too short)")
    n = int.from_bytes(data[:8], "little")
    if n <= 0 or n > size - 8 or n > _MAX_HEADER or len(data) < 8 + n:
        raise TextureFormatError(f"{name}: not a foveate texture (bad header)")
    try:
        header = json.loads(data[8 : 8 + n])
        if not isinstance(header, dict):
            raise TypeError("header is not an object")
        end = max((int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"), default=0)
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        raise TextureFormatError(f"{name}: not a foveate texture (bad header)") from exc
    if size < 8 + n + end:  # the header alone reads fine from a file cut short
        raise TextureFormatError(f"{name}: truncated texture file ({size} of {8 + n + end} bytes)")
    return header


def read_meta(data: bytes, name: str, header: dict[str, Any] | None = None) -> dict[str, Any]:
    """Parse the safetensors header's foveate metadata without reading the tensors; check the format version."""
    header = _header(data, name) if header is None else header
    try:
        meta = json.loads(header["__metadata__"]["foveate"])
    except (ValueError, KeyError, TypeError) as exc:
        raise TextureFormatError(f"{name}: not a foveate texture (no foveate metadata)") from exc
    if isinstance(meta, dict) and meta.get("format") == DOCUMENT_FORMAT_NAME:
        raise TextureKindError(
            f"{name}: a document's texture (several pages), not a single texture; load it with "
            "foveate.DocumentTexture.load (or the store's get_document)"
        )
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_NAME:
        raise TextureFormatError(f"{name}: not a foveate texture")
    if meta.get("format_version") != FORMAT_VERSION:
        raise TextureFormatError(
            f"{name}: texture format version {meta.get('format_version')} is not supported by this foveate "
            f"(reads version {FORMAT_VERSION}); encode the image again"
        )
    return meta


@dataclass
class TextureHeader:
    """What a ``.fvt`` file's header says about its texture, read without the tensors (or torch).  The attributes
    and methods ``foveate info`` prints have the names and meaning of :class:`~foveate.core.texture.Texture`'s."""

    config: EncodeConfig
    content_hash: str
    channels: tuple[str, ...]
    groups: dict[str, tuple[int, int]]
    absent: tuple[str, ...]
    timings_ms: dict[str, float] = field(default_factory=dict)
    extras: dict[str, Any] = field(default_factory=dict)
    tensors: dict[str, tuple[str, tuple[int, ...]]] = field(default_factory=dict)  # name -> (dtype, shape)

    @property
    def patch_size(self) -> int:
        return self.config.patch_size

    @property
    def image_size(self) -> tuple[int, int]:
        shape = self.tensors["image"][1]
        return int(shape[0]), int(shape[1])

    @property
    def num_levels(self) -> int:
        return sum(1 for k in self.tensors if k.startswith("mean."))

    @property
    def level_shapes(self) -> list[tuple[int, int]]:
        shapes = [self.tensors[f"mean.{i}"][1] for i in range(self.num_levels)]
        return [(int(s[0]), int(s[1])) for s in shapes]

    @property
    def id(self) -> str:
        return f"{self.content_hash[:32]}-{self.config.hash()}"

    def _bytes(self, prefix: str) -> int:
        return sum(
            _ITEMSIZE.get(dtype, 0) * math.prod(shape)
            for k, (dtype, shape) in self.tensors.items()
            if k.startswith(prefix)
        )

    def nbytes(self) -> dict[str, int]:
        """Memory by part, as :meth:`Texture.nbytes`: features, coverage, source pixels, stored extras."""
        return {
            "features": self._bytes("mean.") + self._bytes("max."),
            "coverage": self._bytes("coverage."),
            "pixels": self._bytes("image"),
            "extras": self._bytes("extra."),
        }


def read_header(path: str | Path) -> TextureHeader:
    """The header of the ``.fvt`` file at ``path``: reads its first bytes only.  Raises :class:`TextureFormatError`
    for a file that is missing, not a texture or of another format version."""
    path = Path(path)
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(8)
            n = int.from_bytes(head, "little") if len(head) == 8 else 0
            data = head + f.read(min(n, _MAX_HEADER))
    except FileNotFoundError:
        raise TextureFormatError(f"{path}: no such texture file") from None
    except OSError as exc:
        raise TextureFormatError(f"{path}: cannot read ({exc})") from exc
    header = _header(data, str(path), size)
    meta = read_meta(data, str(path), header)
    try:
        tensors = {
            k: (str(v["dtype"]), tuple(int(d) for d in v["shape"])) for k, v in header.items() if k != "__metadata__"
        }
        out = TextureHeader(
            config=EncodeConfig.from_dict(meta["config"]),
            content_hash=str(meta["content_hash"]),
            channels=tuple(meta["channels"]),
            groups={k: tuple(v) for k, v in meta["groups"].items()},
            absent=tuple(meta["absent"]),
            timings_ms=dict(meta.get("timings_ms", {})),
            extras=dict(meta.get("extras", {})),
            tensors=tensors,
        )
        out.image_size, out.level_shapes  # noqa: B018  (the image and level 0 must be there)
    except KeyError as exc:
        raise TextureFormatError(f"{path}: incomplete texture file (missing {exc})") from exc
    except (TypeError, ValueError, IndexError, AttributeError) as exc:  # a field of the wrong kind (a null config)
        raise TextureFormatError(f"{path}: damaged texture file ({exc})") from exc
    names = [[f"{k}.{i}" for k in ("mean", "max", "coverage")] for i in range(out.num_levels)]
    levels = [[tensors[k][1] if k in tensors else () for k in level] for level in names]
    if not ops.pyramid_fits(tensors["image"][1], out.config.patch_size, len(out.channels), levels):
        raise TextureFormatError(f"{path}: inconsistent texture file (levels or channels do not match)")
    if out.config.hash() != meta.get("config_hash"):  # as Texture.load: another encoder's numbers
        raise TextureFormatError(
            f"{path}: written by an encoder with different settings (config hash "
            f"{meta.get('config_hash')} != {out.config.hash()}); encode the image again"
        )
    return out


def write_file(path: str | Path, data: bytes) -> Path:
    """Write a ``.fvt`` file atomically: a temporary file beside it, then a rename (a crash leaves no partial file)."""
    path = Path(path)
    if path.is_dir():  # else the rename's error names the temporary file
        raise IsADirectoryError(f"{path} is a folder: give a file name to write the texture to")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path
