"""A document's texture as one store entry: :func:`put_document` and :func:`get_document` beside the store's
``put`` and ``get``.  The entry's listing columns (size, levels, layout) are the first page's; the blob is the
document's ``.fvt`` bytes (:meth:`foveate.document.DocumentTexture.to_bytes`), verified as every blob is.  The store's
``get`` on a document's entry raises :class:`~foveate.core.errors.TextureKindError` and keeps the entry."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, cast

from ..core.errors import TextureFormatError
from .records import StoreEntry

if TYPE_CHECKING:
    import torch

    from ..core.texture import Texture
    from ..document.texture import DocumentTexture
    from .store import TextureStore


def put_document(
    store: TextureStore, doc: DocumentTexture, *, source: str | os.PathLike[str] | None = None
) -> tuple[StoreEntry, bool]:
    """Store ``doc`` as one entry unless it is there (its id: the pages' content + the encode config).  Returns
    (entry, created)."""
    # the store reads id, content_hash, config, image_size, num_levels, channels, absent, groups, timings_ms and
    # to_bytes(): a DocumentTexture has each (the first page's layout)
    return store.put(cast("Texture", doc), source=source)


def get_document(
    store: TextureStore, texture_id: str, device: str | torch.device | None = "cpu"
) -> DocumentTexture | None:
    """The stored document texture (its bytes verified), or ``None`` when absent or found corrupt (then dropped).
    A single texture's entry raises :class:`~foveate.core.errors.TextureKindError`."""
    from ..document.texture import DocumentTexture

    data = store.get_bytes(texture_id)
    if data is None:
        return None
    try:
        return DocumentTexture.from_bytes(data, device=device, name=f"store:{texture_id}")
    except TextureFormatError:
        store.delete(texture_id)
        store.counters.add(corrupt=1)
        return None
