"""What a query asks, on the texture's grid, and how much each tile matters for it.

``query`` (:class:`Query`: text and SAM-style prompts), ``base`` (:class:`QueryTerm`, :class:`TermOutput`,
:class:`QueryMaps`), ``terms`` (the query-term registry, where the built-in terms are registered, and
:func:`query_maps`), the built-in terms (``prompt``, ``text/``: where the answer to a question is; ``emphasis``:
colour and reading words -> channels; ``semantic``: image-text embeddings per tile) and ``scorer`` (:class:`Scorer`:
channels and query maps -> score and need, built from :class:`foveate.weights.Weights`).
"""
