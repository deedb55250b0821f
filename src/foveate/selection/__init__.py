"""Selection: spend a token budget on a texture for one query.

``selector`` (``select``: score every tile of every level, run a strategy, cut the tokens), the strategies
``quadtree`` and ``topk`` (pure: per-level arrays in, tiles out) and ``selection`` (:class:`Selection`, the
result, and its ``selection.json`` schema version).  Names load on first use (:mod:`foveate._lazy`).
"""

from .._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "quadtree_select": ".quadtree",
        "SCHEMA_VERSION": ".selection",
        "Selection": ".selection",
        **{n: ".floor" for n in ("FLOOR_FEATURES", "floor_features", "prefer_uniform")},
        **{
            n: ".selector"
            for n in ("Scores", "cut_tokens", "resolve_select_config", "score_texture", "select", "tile_geometry")
        },
        **{n: ".uniform" for n in ("cut_uniform", "uniform_grid", "uniform_scale")},
        **{n: ".topk" for n in ("gist_cover", "topk_select", "topk_split")},
    },
)
