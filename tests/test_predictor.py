"""Encode once, query many: the predictor, and counting encoder calls."""

from __future__ import annotations

import numpy as np
import pytest

import foveate
import foveate.core.texture as texture_mod
from foveate import FoveatePredictor, NoImageSetError, Texture
from foveate.weights.defaults import DEFAULT_WEIGHTS


@pytest.fixture
def encoder_calls(monkeypatch):
    """Count calls of the heavy step (all channel generators run inside ``compute_channels``)."""
    calls = []
    real = texture_mod.compute_channels

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(texture_mod, "compute_channels", counting)
    return calls


def test_select_before_set_image_is_a_clear_error():
    p = FoveatePredictor(device="cpu")
    assert not p.is_image_set
    with pytest.raises(NoImageSetError, match="set_image"):
        p.select("anything")


def test_one_encode_serves_many_selects(encoder_calls, page_path):
    p = FoveatePredictor(device="cpu")
    p.set_image(page_path)
    assert len(encoder_calls) == 1
    sels = [p.select(q, budget=b) for q in ("total", "date", None, {"points": [(100, 100)]}) for b in (64, 273)]
    assert len(encoder_calls) == 1 and len(sels) == 8
    p.reset()
    assert not p.is_image_set
    with pytest.raises(NoImageSetError):
        p.select("total")


def test_loading_a_saved_texture_encodes_nothing(encoder_calls, tmp_path, photo):
    tex = foveate.encode(photo, device="cpu")
    tex.save(tmp_path / "x.fvt")
    assert len(encoder_calls) == 1
    loaded = Texture.load(tmp_path / "x.fvt")
    p = FoveatePredictor(device="cpu")
    p.set_texture(loaded)
    for q in ("a", "b", None):
        p.select(q)
    assert len(encoder_calls) == 1


def test_predictor_matches_plain_functions(photo):
    p = FoveatePredictor(device="cpu", preset="fast")
    p.set_image(photo)
    a = p.select({"points": [(200, 200)]}, budget=100, mode="topk")
    b = foveate.select(foveate.encode(photo, preset="fast", device="cpu"), {"points": [(200, 200)]}, 100, mode="topk")
    np.testing.assert_array_equal(a.boxes, b.boxes)


def test_custom_scorer_changes_the_ranking(photo):
    tex = foveate.encode(photo, preset="fast", device="cpu")
    weighs_red = {**{c: (0.0, 0.0) for c in DEFAULT_WEIGHTS}, "r": (5.0, 0.0)}  # every other channel 0
    only_red = foveate.Scorer(tex.channels, foveate.Weights("only red", weighs_red, {}, {}, {}))
    sel = foveate.select(tex, None, 50, mode="topk", gist=False, scorer=only_red, topk_candidates=(None, None))
    red = tex.channel("r")
    assert red[sel.rows, sel.cols].min() >= np.sort(red.ravel())[-50] - 1e-3
    # the default cascade prunes (500 candidates at level 2, 4k at level 0): an approximation of plain top-k
    pruned = foveate.select(tex, None, 50, mode="topk", gist=False, scorer=only_red)
    assert len(set(zip(pruned.rows, pruned.cols)) & set(zip(sel.rows, sel.cols))) >= 25


def test_scorer_is_trainable(photo):
    import torch

    tex = foveate.encode(photo, preset="fast", device="cpu")
    scorer = foveate.Scorer(tex.channels)
    feats, _ = tex.flat_features()
    score, need = scorer(feats)
    score.sum().backward()
    assert scorer.weight.grad is not None and scorer.weight.grad.abs().sum() > 0
    assert isinstance(scorer, torch.nn.Module)


def test_scorer_inference_path_matches_the_module(photo):
    """``Scorer.evaluate`` (single-threaded NumPy on the CPU) gives the numbers of forward() and bound()."""
    import torch

    tex = foveate.encode(photo, preset="full", device="cpu")
    scorer = foveate.Scorer(tex.channels, foveate.Weights.handset().replace(bias=0.3))
    with torch.no_grad():
        scorer.weight.normal_()
        scorer.need_weight.uniform_(-1, 1)
    feats, _ = tex.flat_features()
    q = torch.rand(feats.shape[0], 1)
    score, need, bound = scorer.evaluate(feats, q, ["prompt"])
    with torch.no_grad():
        s_ref, n_ref = scorer(feats, q, ["prompt"])
        b_ref = scorer.bound(feats, q, ["prompt"])
    np.testing.assert_allclose(score, s_ref.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(need, n_ref.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(bound, b_ref.numpy(), rtol=1e-5, atol=1e-5)


def test_scorer_keeps_the_query_independent_product_per_texture(photo):
    """With the texture's memo, ``evaluate`` keeps the channels' product for the next query: the same numbers as
    without it, recomputed when the weights change in place or the features are rebuilt (``invalidate``)."""
    import torch

    from foveate.query.scorer import CHANNEL_TERMS

    tex = foveate.encode(photo, preset="fast", device="cpu")
    scorer = foveate.Scorer(tex.channels, foveate.Weights.handset().replace(bias=0.1))
    built = []  # the channel products the texture's memo had to build

    def memo(key, build):
        return tex.derived(key, lambda: built.append(key) or build())

    feats, _ = tex.flat_features()
    q = torch.rand(feats.shape[0], 1)
    first = scorer.evaluate(feats, q, ["prompt"], memo=memo)
    assert len(built) == 1 and built[0][0] == CHANNEL_TERMS
    again = scorer.evaluate(feats, q * 0.5, ["prompt"], memo=memo)
    assert len(built) == 1  # reused, not recomputed
    for a, b in zip(again, scorer.evaluate(feats, q * 0.5, ["prompt"])):
        np.testing.assert_array_equal(a, b)
    with torch.no_grad():
        scorer.weight.mul_(-2.0)  # weights changed in place: the kept product no longer applies
    changed = scorer.evaluate(feats, q, ["prompt"], memo=memo)
    assert len(built) == 2
    for a, b in zip(changed, scorer.evaluate(feats, q, ["prompt"])):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(changed[0], first[0])
    tex.invalidate()
    feats2, _ = tex.flat_features()
    assert feats2 is not feats
    for a, b in zip(scorer.evaluate(feats2, q, ["prompt"], memo=memo), scorer.evaluate(feats2, q, ["prompt"])):
        np.testing.assert_array_equal(a, b)
    assert len(built) == 3  # dropped by invalidate, built again


def test_bound_is_optimistic_for_non_negative_weights(photo):
    """With non-negative weights no level-0 tile scores above the bound of a coarse tile containing it."""
    import torch

    tex = foveate.encode(photo, preset="fast", device="cpu")
    scorer = foveate.Scorer(tex.channels)
    with torch.no_grad():
        scorer.weight.uniform_(0, 1)
    feats, offsets = tex.flat_features()
    score, _, bound = scorer.evaluate(feats)
    s0 = score[: offsets[1]].reshape(tex.level_shapes[0])
    for lvl in range(1, tex.num_levels):
        b = bound[offsets[lvl] : offsets[lvl + 1]].reshape(tex.level_shapes[lvl])
        f = 1 << lvl
        up = np.kron(b, np.ones((f, f)))[: s0.shape[0], : s0.shape[1]]
        assert (s0 <= up + 1e-3).all()
