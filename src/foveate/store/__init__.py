"""The texture store (``store``: SQLite in WAL mode, content-addressed, atomic, bounded, verified) and filling
it from image files (``ingest``: ``foveate encode --store``); ``records`` holds what a row and the counters are,
``sqlite`` the schema and how a connection is opened.  See :mod:`foveate.store.store` for the guarantees."""

from .._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        **{
            n: ".ingest"
            for n in ("IMAGE_SUFFIXES", "IngestResult", "IngestSummary", "encode_into_store", "expand_images")
        },
        **{n: ".records" for n in ("GcReport", "StoreCounters", "StoreEntry", "file_name", "texture_blob")},
        **{n: ".sqlite" for n in ("DB_NAME", "SCHEMA_VERSION")},
        "TextureStore": ".store",
        **{n: ".documents" for n in ("get_document", "put_document")},
    },
)
