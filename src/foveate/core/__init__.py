"""The core: everything ``encode`` needs and every stage after it reads.

``errors`` (typed errors), ``config`` (frozen ``EncodeConfig`` / ``SelectConfig``), ``device`` (the one place that
decides device and dtype), ``io`` (decode anything into RGB uint8), ``ops`` (pure image and tile-grid ops),
``channels`` (the channel-group registry, presets, generators) and ``texture`` (``Texture``, ``encode``, save/load).
"""
