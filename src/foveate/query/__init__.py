"""What a query asks, on the texture's grid.

``query`` (:class:`Query`: text and SAM-style prompts), ``terms`` (the query-term registry, the ``prompt`` term,
``query_maps``), ``scorer`` (:class:`Scorer`: channels and query maps -> score and need), and the terms that
register themselves on import: ``text/`` (OCR, MiniLM, the text channels and query term), ``emphasis`` (colour and
reading words -> channels), ``semantic`` (image-text embeddings per tile).  ``terms`` imports the last three in that
order, which fixes the order of ``terms.QUERY_TERMS``; ``foveate.core.channels`` imports the modules that register
channel groups (``text.group``, ``semantic``) the first time its registry is used.
"""
