"""Typed errors. Every error a user can cause is a :class:`FoveateError` with a message that says what to do.

The CLI prints them as one line (exit code 1 or 2); the HTTP service maps them to 4xx responses.
"""

from __future__ import annotations


class FoveateError(Exception):
    """Base class of every error foveate raises on purpose."""


class ImageError(FoveateError):
    """The input could not be turned into an RGB image."""


class ImageDecodeError(ImageError):
    """The file is empty, truncated, corrupt or not an image."""


class ImageTooLargeError(ImageError):
    """The image has more pixels than the configured limit (decompression-bomb guard)."""


class UnsupportedInputError(ImageError):
    """An object of a type or shape foveate cannot read as an image."""


class DocumentError(ImageError):
    """A multi-page document (PDF, multi-page TIFF) that cannot be read as pages."""


class DocumentDecodeError(DocumentError, ImageDecodeError):
    """A PDF or TIFF that is corrupt, truncated or not a document at all."""


class DocumentEncryptedError(DocumentError):
    """A password-protected PDF: foveate does not take passwords; decrypt it first."""


class DocumentEmptyError(DocumentError, ImageDecodeError):
    """A document without a page."""


class DocumentTooLongError(DocumentError, ImageTooLargeError):
    """A document with more pages than the page cap (``max_pages``), refused from its page count before any page is
    rendered."""


class ConfigError(FoveateError, ValueError):
    """An invalid configuration value: unknown preset, group or mode, a bad patch size, ..."""


class BudgetError(ConfigError):
    """A token budget that cannot be honoured (zero, negative, below the coarsest cover)."""


class QueryError(FoveateError, ValueError):
    """A malformed query: a point or box outside the image, a bad label, an oversized text."""


class NoImageSetError(FoveateError, RuntimeError):
    """``select`` was called on a predictor before ``set_image``."""


class TextureFormatError(FoveateError):
    """A saved texture is corrupt, truncated, or written by another format version."""


class TextureKindError(FoveateError, ValueError):
    """A document's texture where a single texture was expected, or the reverse (load it with the other class).
    Not a :class:`TextureFormatError`: the file is sound, and a store must not drop it as corrupt."""


class DatasetError(FoveateError):
    """An evaluation data set that cannot be read at all (no folder, no queries.jsonl, nothing valid in it)."""


class DeviceError(FoveateError):
    """The requested device is unknown or not available."""


class StoreError(FoveateError):
    """The texture store cannot be opened or written (not a store, locked too long, entry above the cap)."""


class StoreFullError(StoreError):
    """A texture larger than the store's whole size cap: no eviction can make room, so retrying cannot help."""

    def __init__(self, texture_id: str, size: int, cap: int) -> None:
        super().__init__(
            f"texture {texture_id} is {size:,} bytes, above the store cap of {cap:,}; raise the cap "
            "(foveate store gc --max-mb, foveate serve --store-max-mb) or encode a smaller image"
        )
        self.texture_id, self.size, self.cap = texture_id, size, cap

    def __reduce__(self) -> tuple[type[StoreFullError], tuple[str, int, int]]:  # crosses process boundaries intact
        return type(self), (self.texture_id, self.size, self.cap)


class VideoError(FoveateError):
    """A video input that cannot be streamed: no frames, not a video, or a frame of another size when the
    session is set to refuse size changes."""


class WeightsError(FoveateError):
    """A weights file that cannot be used: missing, corrupt, not a foveate weights file, or written by another
    format version."""


class MissingExtraError(FoveateError, ImportError):
    """A command or module that needs one of foveate's optional extras, which is not installed (the message says which
    one to install)."""
