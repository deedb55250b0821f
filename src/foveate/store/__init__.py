"""The texture store (``store``: SQLite in WAL mode, content-addressed, atomic, bounded, verified) and filling
it from image files (``ingest``: ``foveate encode --store``).  See :mod:`foveate.store.store` for the guarantees."""

from .ingest import IMAGE_SUFFIXES, IngestResult, IngestSummary, encode_into_store, expand_images
from .store import DB_NAME, SCHEMA_VERSION, GcReport, StoreCounters, StoreEntry, TextureStore, texture_blob
