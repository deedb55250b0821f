"""The three registries -- channel groups, query terms, VLM rules -- hold their contracts for every registered entry
(parametrised over the registries, not over hand-listed names), and each takes a new entry as one module plus one
registration line (the toys in ``tests/toys``), which then works end to end: encode, select, plan, request body."""

from __future__ import annotations

import math

import numpy as np
import pytest

import foveate
from foveate.channels import registry as channel_registry
from foveate.channels.registry import PRESETS, list_groups, register_group
from foveate.core.config import EncodeConfig
from foveate.query import terms as term_registry
from foveate.query.query import Query
from foveate.query.terms import list_terms, query_maps, register_query_term
from foveate.vlm import build_request, plan_for
from foveate.vlm.formats import FORMATS
from foveate.vlm.rules import get_rule, register_rule, rule_entries, rule_examples, rules_help
from foveate.vlm.rules import registry as rule_registry
from foveate.weights import load_weights

from .conftest import random_image
from .toys.checker_group import CHECKER
from .toys.flat_rule import FlatRule
from .toys.left_term import LEFT

COSTS = {"free", "low", "medium", "high"}


@pytest.fixture
def registries():
    """Every registry as it was before the test, restored after it."""
    saved = (
        dict(channel_registry._REGISTRY),
        list(channel_registry.LAYOUT_ORDER),
        dict(PRESETS),
        dict(term_registry.QUERY_TERMS),
        dict(rule_registry._RULES),
    )
    yield
    groups, order, presets, terms, rules = saved
    channel_registry._REGISTRY.clear()
    channel_registry._REGISTRY.update(groups)
    channel_registry.LAYOUT_ORDER[:] = order
    PRESETS.clear()
    PRESETS.update(presets)
    term_registry.QUERY_TERMS.clear()
    term_registry.QUERY_TERMS.update(terms)
    rule_registry._RULES.clear()
    rule_registry._RULES.update(rules)
    rule_registry._CACHE.clear()


# -- channel groups ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list_groups())
def test_every_channel_group_fills_its_channels(name):
    """On a small picture, a group's generator gives (gh, gw, its channels) in [0, 1] -- or the group is absent (no
    source configured: no video, no semantic model, no caller map), stored as zeros and said so."""
    group = channel_registry.get_group(name)
    assert group.channels and len(set(group.channels)) == len(group.channels)
    assert group.cost in COSTS and group.description
    tex = foveate.encode(random_image(70, 90, seed=3), EncodeConfig(groups=(name,)), device="cpu")
    a, b = tex.groups[name]
    assert tex.channels[a:b] == group.channels
    x = tex.mean[0][..., a:b].float().numpy()
    assert x.shape == (*tex.level_shapes[0], len(group.channels))
    assert np.isfinite(x).all() and x.min() >= 0.0 and x.max() <= 1.0
    if name in tex.absent:
        assert not x.any()


def test_presets_name_registered_groups_in_layout_order():
    for preset, names in PRESETS.items():
        assert set(names) <= set(list_groups()), preset
        assert list(names) == [g for g in channel_registry.LAYOUT_ORDER if g in names], preset


def test_a_new_channel_group_is_one_module_and_one_line(registries, photo):
    register_group(CHECKER, presets=("fast",))
    assert "checker" in list_groups() and PRESETS["fast"][-1] == "checker"
    tex = foveate.encode(photo, preset="fast", device="cpu")
    board = tex.channel("checker")
    assert board[0, 0] == 0.0 and board[0, 1] == 1.0 and board[1, 1] == 0.0
    sel = foveate.select(tex, {"points": [(200, 150)]}, 64, weights="handset")
    assert 0 < len(sel) <= 64


# -- query terms ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list_terms())
@pytest.mark.parametrize("weights", ["default", "handset"])
def test_every_query_term_maps_the_grid(name, weights, page_texture):
    """A term's map is (gh, gw) float32 in [-1, 1] or nothing; its notes are strings; the scorer weighs it."""
    term = term_registry.QUERY_TERMS[name]
    assert term.description and math.isfinite(term.weight) and math.isfinite(term.need_weight)
    w = load_weights(weights)
    for query in (
        Query(text="What is the total due? Read the red text."),
        Query(points=((300.0, 200.0),)),
        Query(text="total", boxes=((100.0, 100.0, 400.0, 300.0),)),
        Query(),
    ):
        out = term.output(page_texture, query, w)
        assert all(isinstance(n, str) and n for n in out.notes)
        if out.map is not None:
            assert out.map.shape == page_texture.level_shapes[0] and out.map.dtype == np.float32
            assert np.isfinite(out.map).all() and out.map.min() >= -1.0 and out.map.max() <= 1.0
        if out.lines is not None:
            n = len(out.lines.probs)
            assert out.lines.boxes.shape == (n, 4) and out.lines.heights.shape == (n,)
            assert (out.lines.probs >= 0).all() and out.lines.probs.sum() <= 1.0 + 1e-6
    scorer = foveate.Scorer.from_weights(w, page_texture.channels)
    assert name in scorer.query_names


def test_a_new_query_term_is_one_module_and_one_line(registries, page_texture):
    register_query_term(LEFT)
    assert list_terms()[-1] == "left"
    qm = query_maps(page_texture, Query(text="the left margin"), load_weights("handset"))
    assert "left" in qm.names
    sel = foveate.select(
        page_texture,
        "what is written in the left margin?",
        144,
        mode="topk",
        gist=False,
        weights="handset",
        floor="off",
    )
    gw = page_texture.level_shapes[0][1]
    assert np.mean(sel.cols < gw // 2) > 0.8  # the term's weight pulls the tokens to the left half


# -- VLM rules -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", rule_examples())
def test_every_vlm_rule_prices_plans_and_builds_its_body(spec, page_texture):
    """A rule cites its source, prices pictures (vectorised, positive tokens, a seen size no larger than sent unless
    the provider pads), takes the whole image, and owns a request format whose body ends with the question."""
    rule = get_rule(spec)
    assert rule.name and rule.source and rule.options and rule.format in FORMATS.values()
    w, h = np.array([[40, 1000], [3000, 512]]), np.array([[30, 700], [200, 512]])
    for option in rule.options:
        tokens, sw, sh = rule.price(w, h, option)
        assert tokens.shape == sw.shape == sh.shape == w.shape and (tokens > 0).all() and (sw >= 1).all()
    sel = foveate.select(page_texture, "What is the total due?", 273)
    req = build_request(page_texture.image, sel, rule, inputs=False)
    assert req.plan.tokens <= req.plan.image.tokens  # never more than the whole image as the provider takes it
    assert req.api == rule.api and len(req.encoded) == len(req.plan.pictures)
    assert "What is the total due?" in str(req.body)


def test_help_names_every_rule():
    text = rules_help()
    for entry in rule_entries():
        assert entry.usage in text


def test_a_new_vlm_rule_is_one_module_and_one_line(registries, page_texture):
    register_rule("flat", lambda arg: FlatRule(), argument=None)
    assert "flat" in rules_help() and "flat" in rule_examples()
    sel = foveate.select(page_texture, "What is the total due?", 273)
    plan = plan_for(sel, "flat")
    assert plan.tokens <= plan.image.tokens == 100  # a flat price: one picture never costs more than the image
    req = build_request(page_texture.image, sel, "flat")
    assert req.api == "gemini" and req.body["contents"][0]["parts"][-1] == {"text": "What is the total due?"}
