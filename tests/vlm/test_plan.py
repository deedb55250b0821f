"""The crop planner's promises, for every rule and every row of the model table, over random selections and image sizes
(hypothesis): never more tokens than the whole image as the provider takes it, and -- unless the plan says it fell
back to the image -- every selected token's region inside a picture the model sees at the token's scale or finer,
after the provider's own resize. Plus the demo photo that once cost more than the image, and the planner's behaviour
on real selections."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import foveate
from foveate.core.errors import ConfigError
from foveate.vlm import get_rule, list_models, plan_for, plan_tokens
from foveate.vlm.plan import PICTURE_TEXT_TOKENS, _objective
from foveate.vlm.rules import rule_examples

#: every registered rule (one spec each) and the rule of every row of the model table
RULES = sorted({*rule_examples(), *(row.rule for row in list_models())})


@st.composite
def selections(draw):
    """Random tokens on a random image: (grid spans (K, 4), scales (K,), (h, w), patch)."""
    patch = draw(st.sampled_from([8, 14, 16, 32]))
    h = draw(st.integers(1, 2400))
    w = draw(st.integers(1, 2400))
    gh, gw = -(-h // patch), -(-w // patch)
    k = draw(st.integers(1, 60))
    spans, scales = [], []
    for _ in range(k):
        lvl = draw(st.integers(0, 4))
        f = 1 << lvl
        r = draw(st.integers(0, max(0, -(-gh // f) - 1)))
        c = draw(st.integers(0, max(0, -(-gw // f) - 1)))
        spans.append((r * f, c * f, min((r + 1) * f, gh), min((c + 1) * f, gw)))
        scales.append(float(f))
    return np.array(spans, np.int64), np.array(scales), (h, w), patch


def check_plan(plan, rule, grid, scales, image_size, patch, max_pictures=None):
    h, w = image_size
    rule = get_rule(rule)
    # promise 1: never more than the whole image as the provider takes it
    assert plan.tokens <= plan.image.tokens
    assert plan.fallback or plan.tokens < plan.image.tokens
    (sw, sh), whole = rule.whole(w, h)
    assert plan.image.tokens == whole.tokens and plan.image.sent == (sw, sh)
    # every picture: inside the image, priced as the rule prices what is sent
    for p in plan.pictures + [plan.uniform]:
        x0, y0, x1, y1 = p.box
        assert 0 <= x0 < x1 <= w and 0 <= y0 < y1 <= h
        again = rule.sendings(*p.sent)[rule.options.index(p.option)]
        assert (again.tokens, again.seen) == (p.tokens, p.seen)
    assert plan.tokens == sum(p.tokens for p in plan.pictures)
    limit = [v for v in (rule.max_pictures, max_pictures) if v is not None]
    assert not limit or len(plan.pictures) <= min(limit) or plan.fallback
    # promise 2: every token kept at its scale (checked here, independently of the planner's own count)
    boxes = np.stack(
        [grid[:, 1] * patch, grid[:, 0] * patch, np.minimum(grid[:, 3] * patch, w), np.minimum(grid[:, 2] * patch, h)],
        -1,
    )
    kept = np.zeros(len(scales), bool)
    for view in (v for p in plan.pictures for v in p.views()):  # a composite shows each of its parts
        x0, y0, x1, y1 = view.box
        scale = max((x1 - x0) / view.seen[0], (y1 - y0) / view.seen[1])
        kept |= (
            (boxes[:, 0] >= x0)
            & (boxes[:, 1] >= y0)
            & (boxes[:, 2] <= x1)
            & (boxes[:, 3] <= y1)
            & (scale <= scales * (1 + 1e-6))
        )
    assert plan.kept == int(kept.sum())
    if not plan.fallback:
        assert kept.all()
    assert plan.uniform.tokens <= max(plan.tokens, min(s.tokens for s in rule.sendings(1, 1)))
    # promise 3: never costlier than the whole image resized (any option) so that every token keeps its scale
    if len(scales):
        finest = float(scales.min())
        fw, fh = rule.fit(np.array([w]), np.array([h]), np.array([finest]))
        for option in rule.options:
            t, vw, vh = rule.price(fw, fh, option)
            if max(w / vw[0], h / vh[0]) <= finest * (1 + 1e-6):
                assert plan.tokens <= int(t[0]), (option, int(t[0]))
    json.dumps(plan.to_dict())


@pytest.mark.parametrize("rule", RULES)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sel=selections(), cap=st.one_of(st.none(), st.integers(1, 4)))
def test_plan_promises(rule, sel, cap):
    grid, scales, size, patch = sel
    if rule.startswith("qwen") and max(size) / min(size) > 200:  # transformers' processor refuses such pictures
        with pytest.raises(ConfigError, match="aspect ratio"):
            plan_tokens(grid, scales, size, patch, rule)
        return
    plan = plan_tokens(grid, scales, size, patch, rule, max_pictures=cap)
    check_plan(plan, rule, grid, scales, size, patch, cap)


def test_demo_photo_never_costs_more_than_the_image(photo_texture):
    """The old estimate planned 2,393 tokens for `make demo`'s photo against 1,369 for the image alone."""
    sel = foveate.select(photo_texture, {"points": [(250, 180)]})
    for rule in RULES:
        plan = plan_for(sel, rule)
        check_plan(plan, rule, sel.grid, np.exp2(sel.levels.astype(float)), sel.image_size, sel.patch_size)
    plan = plan_for(sel, "patch:14")
    assert plan.image.tokens == 37 * 37 and plan.tokens < 1369


def test_plans_on_a_page(page_texture):
    sel = foveate.select(page_texture, "What is the total due?", budget=273)
    for rule in ("openai", "anthropic", "qwen2-vl"):
        plan = plan_for(sel, rule)
        check_plan(plan, rule, sel.grid, np.exp2(sel.levels.astype(float)), sel.image_size, sel.patch_size)
        assert not plan.fallback and plan.tokens < 0.6 * plan.image.tokens
        if plan.pictures[0].kind == "composite":  # the regions packed in one picture, the page's context among them
            assert len(plan.pictures) == 1 and plan.pictures[0].parts[0].box == (0, 0, *sel.image_size[::-1])
        else:
            assert plan.pictures[0].kind == "context"
            assert all(p.kind == "crop" for p in plan.pictures[1:])
    # a flat price per picture: the regions in one picture at the lowest level, a quarter of the page's
    gem = plan_for(sel, "gemini-3")
    assert [p.kind for p in gem.pictures] == ["composite"] and gem.tokens == 280 and gem.image.tokens == 1120
    # gemini's whole page is four 258-token tiles; LLaVA takes one picture: nothing smaller keeps every token
    assert plan_for(sel, "llava-1.5").fallback
    assert plan_for(sel, "llava-1.5").notes


def test_plan_is_deterministic_and_respects_a_picture_cap(page_texture):
    sel = foveate.select(page_texture, "When was it signed?", budget=576)
    a, b = plan_for(sel, "anthropic"), plan_for(sel, "anthropic")
    assert [p.to_dict() for p in a.pictures] == [p.to_dict() for p in b.pictures]
    capped = plan_for(sel, "anthropic", max_pictures=2)
    assert len(capped.pictures) <= 2 or capped.fallback
    # what the planner minimises (picture tokens + each region's introducing text) only grows under a cap
    assert _objective(capped.pictures, PICTURE_TEXT_TOKENS) >= _objective(a.pictures, PICTURE_TEXT_TOKENS)


def test_topk_without_gist_can_skip_the_context(page_texture):
    sel = foveate.select(page_texture, {"boxes": [(560, 450, 790, 550)]}, budget=64, mode="topk", gist=False)
    plan = plan_for(sel, "anthropic")
    assert not plan.fallback and all(p.kind == "crop" for p in plan.pictures)


def test_no_tokens_sends_the_image():
    plan = plan_tokens(np.zeros((0, 4), np.int64), np.zeros(0), (100, 80), 16, "anthropic")
    assert plan.fallback and plan.pictures == [plan.image] and "no tokens" in plan.notes[0]


def test_a_uniform_selection_is_never_planned_dearer_than_its_resize(page_path):
    """Issue 36: with ``--preset fast`` the bundled page's selection falls back to the uniform layout at half scale,
    and the planner sent two overlapping half-scale crops for 170 tokens where the whole page at that scale (the
    ledger's own uniform resize) costs 85 under OpenAI's low detail."""
    tex = foveate.encode(str(page_path), preset="fast", device="cpu")
    sel = foveate.select(tex, "What is the total due?")
    plan = plan_for(sel, "openai")
    assert plan.tokens == plan.uniform.tokens == 85 and len(plan.pictures) == 1
    check_plan(plan, "openai", sel.grid, np.asarray(sel.scales, float), sel.image_size, sel.patch_size)
