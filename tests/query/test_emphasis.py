"""Query-aware channel emphasis: colour words and reading words, on a texture with and without text channels."""

from __future__ import annotations

import numpy as np

import foveate


def test_emphasis_rules(page_texture):
    from foveate.query.emphasis import emphasis_map, emphasis_rules

    assert emphasis_rules({"what", "colour", "is", "it"}) == ["colour"]
    assert emphasis_rules({"red", "car"}) == ["colour:red"]
    assert emphasis_rules({"what", "does", "it", "say"}) == ["reading"]
    m = emphasis_map(page_texture, foveate.Query(text="what does it say?"), [])
    np.testing.assert_allclose(m, np.maximum(page_texture.channel("text"), page_texture.channel("text_density")))
    img = np.full((64, 96, 3), 255, np.uint8)
    img[16:48, 48:80] = (210, 30, 30)
    tex = foveate.encode(img, preset="fast", device="cpu")
    red = emphasis_map(tex, foveate.Query(text="where is the red square?"), [])
    assert red[1:3, 3:5].min() > 0.9 and red[0, 0] < 0.1
    assert emphasis_map(tex, foveate.Query(text="what does it say?"), []) is None  # no text channels
