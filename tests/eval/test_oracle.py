"""The oracle baseline: never over budget, and it finds the boxes."""

from __future__ import annotations

import itertools

import numpy as np

from foveate.core.config import SelectConfig
from foveate.core.ops import level_shapes
from foveate.eval.baselines import Tokens
from foveate.eval.metrics import query_metrics
from foveate.eval.oracle import oracle_tiles


def test_oracle_is_never_over_budget_and_finds_boxes():
    rng = np.random.default_rng(3)
    shapes = level_shapes(63, 48, 5)  # 754 x 1000 at P = 16
    for mode, budget in itertools.product(("quadtree", "topk"), (12, 13, 40, 64, 273, 4000)):
        for _ in range(5):
            xy = rng.integers(0, 700, (4, 2))
            boxes = np.concatenate([xy, xy + rng.integers(5, 120, (4, 2))], 1).astype(float)
            heights = rng.uniform(4, 40, 4)
            cfg = SelectConfig(budget=budget, mode=mode)
            tiles = oracle_tiles(shapes, 16, boxes, heights, cfg)
            assert len(tiles) <= budget and len(set(tiles)) == len(tiles)
    # one 12 px line: legible at level 0 only; 64 tokens are enough to reach it
    box = np.array([[300.0, 400.0, 380.0, 412.0]])
    for mode in ("quadtree", "topk"):
        cfg = SelectConfig(budget=64, mode=mode)
        toks = Tokens.from_tiles(oracle_tiles(shapes, 16, box, None, cfg), (1000, 754), 16, shapes[0])
        m = query_metrics(toks.boxes, None, box, (1000, 754), token_scales=toks.scales)
        assert m.hit and m.legible_coverage == 1.0
