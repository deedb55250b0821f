"""Encode-time channels: what a texture holds per tile, and the generators that fill it.

``base`` (:class:`ChannelGroup`, :class:`EncodeContext`), the built-in groups (``image``: colour, edges, frequency,
motion, saliency, position, clusters, temporal, distance, attention, boundaries; ``text``: OCR lines, MiniLM line
embeddings, the text mask and density; ``semantic``: image-text embeddings per tile) and ``registry`` (where the
built-ins are registered, the presets, :func:`run_groups`).  Names load on first use (:mod:`foveate._lazy`).
"""

from .._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "ChannelGroup": ".base",
        "EncodeContext": ".base",
        **{
            n: ".registry"
            for n in (
                "LAYOUT_ORDER",
                "PRESETS",
                "get_group",
                "list_groups",
                "register_group",
                "resolve_groups",
                "run_groups",
                "with_semantic_model",
            )
        },
    },
)
