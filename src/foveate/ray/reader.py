"""Reading a texture dataset without Ray (pyarrow only): one texture by id, every texture, a ``DATASET/#ID``
reference, and copying a dataset into a local texture store."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.errors import DatasetError
from .dataset import (
    MANIFEST,
    TEXTURE_COLUMNS,
    check_texture_manifest,
    is_uri,
    iter_parts,
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


def import_into_store(where: str | os.PathLike, store: TextureStore) -> dict[str, int]:
    """Copy every texture of the dataset into ``store`` (each re-verified on the way: pixels against their
    content hash).  Returns counts: ``imported``, ``stored`` (there already), ``without_texture`` (failed and
    duplicate rows)."""
    from ..core.texture import Texture

    open_textures(where)
    counts = {"imported": 0, "stored": 0, "without_texture": 0}
    for t in iter_parts(where, ["id", "source", "texture", "error"]):
        for row in t.to_pylist():
            data = row["texture"]
            if data is None:
                counts["without_texture"] += 1
            elif row["id"] in store:
                counts["stored"] += 1
            else:
                tex = Texture.load(row)
                _, created = store.put(tex, blob=(data, hashlib.sha256(data).hexdigest()))
                counts["imported" if created else "stored"] += 1
    return counts
