"""Reading a texture dataset without Ray (pyarrow only): one texture by id, every texture, a ``DATASET/#ID``
reference, and copying a dataset into a local texture store (:class:`ImportSummary`: what each row became)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import DatasetError, TextureFormatError
from .dataset import (
    MANIFEST,
    TEXTURE_COLUMNS,
    check_texture_manifest,
    is_uri,
    iter_parts,
    iter_row_groups,
    open_manifest,
    read_rows,
    scan,
)

if TYPE_CHECKING:  # pragma: no cover
    from ..core.texture import Texture
    from ..store import TextureStore


def open_textures(where: str | os.PathLike) -> dict:
    """The manifest of the textures dataset at ``where``, checked against this foveate's texture format."""
    doc = open_manifest(where, "textures")
    check_texture_manifest(where, doc)
    return doc


def find_texture(where: str | os.PathLike, texture_id: str, device="cpu") -> Texture:
    """The texture of id ``texture_id``: scans the ``id`` column (no texture bytes), then reads the one row
    group that holds it (``ROW_GROUP_ROWS`` textures)."""
    from ..core.texture import Texture

    open_textures(where)
    index = scan(where, ["id", "texture_size"])
    ids = index.column("id").to_pylist()
    sizes = index.column("texture_size").to_pylist()
    hit = next((i for i, (t, s) in enumerate(zip(ids, sizes)) if t == texture_id and s), None)
    if hit is None:
        near = sorted({t for t in ids if t and t.startswith(texture_id[:8])})[:3]
        hint = f"; ids starting alike: {', '.join(near)}" if near else ""
        raise DatasetError(f"no texture {texture_id} in {where}{hint}")
    row = read_rows(
        where, index.column("_part")[hit].as_py(), [index.column("_row")[hit].as_py()], ["id", "texture", "error"]
    ).to_pylist()[0]
    return Texture.load(row, device=device)


def iter_textures(where: str | os.PathLike, device="cpu", verify: bool = True) -> Iterator[tuple[dict, Texture]]:
    """(row without its bytes, texture) for every row of the dataset that holds a texture, part by part."""
    from ..core.texture import Texture

    open_textures(where)
    for t in iter_parts(where, TEXTURE_COLUMNS):
        for row in t.to_pylist():
            if row["texture"] is not None:
                tex = Texture.load(row, device=device, verify=verify)
                row.pop("texture")
                yield row, tex


def split_ref(ref: str) -> tuple[str, str] | None:
    """``DATASET/#ID`` (or ``DATASET#ID``) -> (dataset, id) when DATASET is a texture dataset (a folder with a
    manifest, or a URI); ``None`` for anything else."""
    if "#" not in ref or (not is_uri(ref) and Path(ref).exists()):
        return None
    base, _, tid = ref.rpartition("#")
    base = base[:-1] if base.endswith("/") else base
    if not base or not tid or "/" in tid:
        return None
    if not is_uri(base) and not (Path(base) / MANIFEST).is_file():
        return None
    return base, tid


@dataclass
class ImportSummary:
    """What :func:`import_into_store` did with each row: ``imported``; skipped: ``stored`` (there already) and
    ``without_texture`` (failed and duplicate rows); ``corrupt``: row id (its source or ``part#row`` when it has
    none) -> why its texture was not imported."""

    imported: int = 0
    stored: int = 0
    without_texture: int = 0
    corrupt: dict[str, str] = field(default_factory=dict)

    @property
    def skipped(self) -> int:
        return self.stored + self.without_texture

    @property
    def rows(self) -> int:
        return self.imported + self.skipped + len(self.corrupt)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "imported": self.imported,
            "skipped": self.skipped,
            "stored": self.stored,
            "without_texture": self.without_texture,
            "corrupt": len(self.corrupt),
            "corrupt_rows": dict(sorted(self.corrupt.items())),
        }


def _verified(row: dict) -> Texture:
    """The texture of a dataset row, its pixels checked against their content hash and its id against the row's."""
    from ..core.texture import Texture

    tid = row.get("id")
    if not isinstance(tid, str) or not tid:
        raise TextureFormatError("the row has a texture but no id")
    tex = Texture.load(row)
    if tex.id != tid:
        raise TextureFormatError(f"the row of id {tid} holds the texture of {tex.id}")
    return tex


def import_into_store(where: str | os.PathLike, store: TextureStore) -> ImportSummary:
    """Copy every texture of the dataset into ``store``, each verified on the way (its pixels against their content
    hash, its id against the row's) and stored with its source's file name.  A corrupt row is recorded in the
    summary and the import goes on; a malformed manifest or part is a :class:`DatasetError` (what was imported
    before it stays: a rerun skips it)."""
    open_textures(where)
    summary = ImportSummary()
    for part, first, table in iter_row_groups(where, ["id", "source", "texture"]):
        for i, row in enumerate(table.to_pylist()):
            data = row["texture"]
            if data is None:
                summary.without_texture += 1
                continue
            if isinstance(row["id"], str) and row["id"] in store:
                summary.stored += 1
                continue
            try:
                tex = _verified(row)
            except Exception as exc:  # noqa: BLE001 - bytes that break the reader: a corrupt row, not a failed import
                name = str(row["id"] or row["source"] or f"{part}#{first + i}")
                why = " ".join(str(exc).split()) or type(exc).__name__
                summary.corrupt[name] = why.removeprefix(f"{name}: ")
                continue
            _, created = store.put(tex, blob=(data, hashlib.sha256(data).hexdigest()), source=row["source"])
            if created:
                summary.imported += 1
            else:
                summary.stored += 1
    return summary
