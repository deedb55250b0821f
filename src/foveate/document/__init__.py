"""Multi-page documents (PDF, multi-page TIFF): one texture per page (:class:`DocumentTexture`), one token budget
across the pages (:func:`select_document`).  ``load`` reads and renders the pages, ``textlayer`` reads a born-digital
page's own text in place of OCR, ``texture`` encodes, saves and loads, ``select`` spends the budget.  Names load on
first use (:mod:`foveate._lazy`)."""

from .._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        **{n: ".load" for n in ("DEFAULT_DPI", "DEFAULT_MAX_PAGES", "DocumentPage", "LoadedDocument")},
        **{n: ".load" for n in ("document_kind", "load_document")},
        **{n: ".texture" for n in ("DocumentTexture", "encode_document")},
        "is_document_file": ".header",
        **{n: ".select" for n in ("DocumentSelection", "select_document")},
    },
)
