"""Encode and select over a corpus on a Ray cluster (the optional extra ``foveate[ray]``).

* :func:`encode_dataset` -- images (folders, globs, lists of paths or URIs, a Ray Dataset) into a texture dataset:
  Parquet parts of rows ``id, source, width, height, preset, texture (.fvt bytes), texture_size, encode_ms,
  error``; resumable, one row per image, a bad image a row with its error.
* :func:`select_dataset` -- a table of queries joined with a texture dataset into a dataset of selection
  documents.
* reading (pyarrow only, no Ray): :func:`find_texture` (random access by id), :func:`iter_textures`,
  :func:`import_into_store`; ``Texture.load(row)`` reads a row.

The on-disk layout is in :mod:`foveate.ray.dataset`; the plan for 10^7 images in docs/scale.md.  Importing this
package imports neither Ray nor pyarrow.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "encode_dataset": ".encode",
    "select_dataset": ".select",
    "find_texture": ".reader",
    "iter_textures": ".reader",
    "import_into_store": ".reader",
    "ImportSummary": ".reader",
    "JobSummary": ".runtime",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_EXPORTS[name], __name__), name)
