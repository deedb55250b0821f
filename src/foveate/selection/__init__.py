"""Selection: spend a token budget on a texture for one query.

``selector`` (``select``: score every tile of every level, run a strategy, cut the tokens), the strategies
``quadtree`` and ``topk`` (pure: per-level arrays in, tiles out) and ``selection`` (:class:`Selection`, the
result, and its ``selection.json`` schema version).
"""

from .quadtree import quadtree_select
from .selection import SCHEMA_VERSION, Selection
from .floor import FLOOR_FEATURES, floor_features, prefer_uniform
from .selector import Scores, cut_tokens, resolve_select_config, score_texture, select, tile_geometry
from .uniform import cut_uniform, uniform_grid, uniform_scale
from .topk import gist_cover, topk_select, topk_split
