"""The uniform and random baselines (hand-computed and invariants)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from foveate.core.ops import level_shapes
from foveate.eval.baselines import random_tiles, uniform_scale, uniform_tokens


def test_uniform_scale_hand_computed():
    # 100 x 50 image, 10 px tiles: full resolution is 10 x 5 = 50 tiles
    assert uniform_scale((50, 100), 10, 50) == 1.0
    assert uniform_scale((50, 100), 10, 500) == 1.0  # never upsampled
    # 12 tokens: s = 2 gives 5 x 3 = 15 (too many); the next breakpoint, s = 2.5, gives 4 x 2 = 8
    assert uniform_scale((50, 100), 10, 12) == pytest.approx(2.5)
    assert uniform_scale((50, 100), 10, 15) == pytest.approx(2.0)
    assert uniform_scale((50, 100), 10, 1) == pytest.approx(10.0)  # 1 x 1: the 100 px side in one 10 px token
    t = uniform_tokens((50, 100), 10, 12)
    assert len(t) == 8 and np.all(t.scales == 2.5)
    assert t.boxes.tolist()[:2] == [[0, 0, 25, 25], [25, 0, 50, 25]]
    assert t.boxes.tolist()[-1] == [75, 25, 100, 50]


@pytest.mark.parametrize("h,w,patch", [(360, 480, 16), (1000, 754, 16), (7, 300, 16), (640, 427, 14)])
def test_uniform_grid_tiles_the_image_within_budget(h, w, patch):
    for budget in (1, 2, 5, 64, 144, 273, 576, 5000):
        t = uniform_tokens((h, w), patch, budget)
        assert 1 <= len(t) <= budget
        area = ((t.boxes[:, 2] - t.boxes[:, 0]) * (t.boxes[:, 3] - t.boxes[:, 1])).sum()
        assert area == pytest.approx(h * w)  # disjoint and covering
        # a slightly finer grid would not fit: s is the smallest scale that does
        s = float(t.scales[0])
        if s > 1:
            finer = math.ceil(w / (s * 0.999 * patch)) * math.ceil(h / (s * 0.999 * patch))
            assert finer > budget


def test_random_tiles():
    shapes = level_shapes(23, 30, 5)  # a 480 x 360 page at P = 16: top level 2 x 2
    a = random_tiles(shapes, 64, True, np.random.default_rng(0))
    b = random_tiles(shapes, 64, True, np.random.default_rng(0))
    c = random_tiles(shapes, 64, True, np.random.default_rng(1))
    assert a == b and a != c
    assert len(a) == 64 and len(set(a)) == 64
    assert a[:4] == [(4, 0, 0), (4, 0, 1), (4, 1, 0), (4, 1, 1)]  # the gist
    assert all(t[0] == 0 for t in a[4:])
    assert all(t[0] == 0 for t in random_tiles(shapes, 64, False, np.random.default_rng(0)))
    assert len(random_tiles(shapes, 10_000, True, np.random.default_rng(0))) == 4 + 23 * 30
