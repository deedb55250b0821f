"""Moved to :mod:`foveate.core.texture` in 0.2.0; this alias keeps ``from foveate.texture import ...`` working.

Patch (monkeypatch) names in :mod:`foveate.core.texture`, where they are looked up, not here.
"""

from .core.fvt import FORMAT_NAME, FORMAT_VERSION
from .core.texture import (
    Texture,
    compute_channels,
    content_hash,
    encode,
    encode_array,
    texture_id,
)

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "Texture",
    "compute_channels",
    "content_hash",
    "encode",
    "encode_array",
    "texture_id",
]
