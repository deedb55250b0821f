"""Every rule against the worked examples of the document it cites (foveate.vlm.rules docstrings)."""

from __future__ import annotations

import numpy as np
import pytest

from foveate.core.errors import ConfigError
from foveate.vlm import Sending, get_rule, list_rules, register_rule
from foveate.vlm.rules import Patches


def one(rule, w, h, option=None):
    return get_rule(rule).sendings(w, h)[0 if option is None else get_rule(rule).options.index(option)]


# -- OpenAI tile rule (GPT-4o): the guide's three examples, and the shrink-only reading -----------------------


def test_openai_worked_examples():
    assert one("openai", 1024, 1024, "high") == Sending(765, (768, 768), "high")
    assert one("openai", 2048, 4096, "high") == Sending(1105, (768, 1536), "high")
    assert one("openai", 4096, 8192, "low").tokens == 85


def test_openai_shrinks_only():
    # forum-reported bills, which the shrink-only reading matches (an upscale to 768 would bill 765 for both)
    assert one("openai", 500, 500, "high").tokens == 255
    assert one("openai", 513, 500, "high").tokens == 425
    assert one("openai", 300, 200, "high").seen == (300, 200)
    assert one("openai", 300, 200, "low").seen == (300, 200)
    assert one("openai", 1024, 1024, "low").seen == (512, 512)


def test_openai_models():
    assert one("openai:gpt-4o-mini", 1024, 1024, "high").tokens == 2833 + 4 * 5667
    assert one("openai:o3", 1024, 1024, "high").tokens == 75 + 4 * 150
    with pytest.raises(ConfigError, match="openai-patch"):
        get_rule("openai:gpt-4.1-mini")


# -- OpenAI 32-px patch rule ---------------------------------------------------------------------------------


def test_openai_patch_worked_examples():
    """The current guide (developers.openai.com/api/docs/guides/images-vision, "Calculating costs", read 2026-11-27):
    gpt-5.4 ``high`` fits 2048 px and 2,500 patches, x1.2."""
    r = get_rule("openai-patch:gpt-5.4")
    assert one("openai-patch:gpt-5.4", 1024, 1024, "high") == Sending(1229, (1024, 1024), "high")  # ceil(1024 x 1.2)
    s = one("openai-patch:gpt-5.4", 2048, 2048, "high")
    assert s.seen == (1600, 1600) and s.tokens == 3000  # 50 x 50 = 2500 patches, ceil(2500 x 1.2)
    assert r.options == ("high", "low", "original")  # auto means high on gpt-5.4
    assert get_rule("openai-patch:gpt-5.5").options[0] == "original"  # and original on gpt-5.5


def test_openai_patch_previous_version_examples():
    """The previous version of the guide (a 1,536-patch budget), which the table keeps for the models the current
    one no longer sizes: 1024 x 1024 = 1024 patches; 1800 x 2400 -> shrink 0.603, adjusted 0.586 -> 1056 x 1408 = 33
    x 44 = 1452 patches."""
    nano = get_rule("openai-patch:gpt-4.1-nano")
    assert nano.sendings(1024, 1024)[0] == Sending(int(np.ceil(1024 * 2.46)), (1024, 1024), None)
    s = nano.sendings(1800, 2400)[0]
    assert s.seen == (1056, 1408) and s.tokens == int(np.ceil(1452 * 2.46))
    assert get_rule("openai-patch:o4-mini").tokens(1800, 2400) == int(np.ceil(1452 * 1.72))
    assert get_rule("openai-patch:o4-mini").tokens(32, 32) == 2  # 1 patch x 1.72, rounded up
    # gpt-4.1-mini follows the current version: fitted in 2048 px (1536 x 2048 = 3072 patches), within its 6,144
    assert get_rule("openai-patch").sendings(1800, 2400)[0] == Sending(int(np.ceil(3072 * 1.62)), (1536, 2048), None)


@pytest.mark.parametrize("model", ["gpt-4.1-nano", "gpt-5.4", "gpt-5.5", "gpt-5.6-sol"])
def test_openai_patch_budgets_hold(model):
    from foveate.vlm.rules.openai import MAX_PATCHES, OPENAI_PATCH_MODELS, REFUSED

    rule = get_rule(f"openai-patch:{model}")
    spec = OPENAI_PATCH_MODELS[model]
    rng = np.random.default_rng(0)
    w, h = rng.integers(1, 9000, 2000), rng.integers(1, 9000, 2000)
    for option in rule.options:
        limit, budget = spec.details[option]
        t, sw, sh = rule.price(w, h, option)
        patches = (-(-sw // 32)) * (-(-sh // 32))
        assert ((sw <= w) & (sh <= h) & (np.maximum(sw, sh) <= limit)).all()
        assert budget is None or (patches <= budget).all()
        assert ((t == REFUSED) == (patches > MAX_PATCHES)).all()
        assert (t[t < REFUSED] == np.ceil(patches[t < REFUSED] * spec.multiplier - 1e-9)).all()


# -- Anthropic ------------------------------------------------------------------------------------------------

#: platform.claude.com/docs/en/build-with-claude/vision (read 2026-11-27): size -> (standard: seen, tokens),
#: (high resolution, "Claude 4.7 and later models": seen, tokens)
ANTHROPIC_EXAMPLES = {
    (200, 200): (((200, 200), 64), ((200, 200), 64)),
    (1000, 1000): (((1000, 1000), 1296), ((1000, 1000), 1296)),
    (1092, 1092): (((1092, 1092), 1521), ((1092, 1092), 1521)),
    (1920, 1080): (((1456, 819), 1560), ((1920, 1080), 2691)),
    (2000, 1500): (((1270, 952), 1564), ((2000, 1500), 3888)),  # the table's 1269 x 952: see the rule's docstring
    (3840, 2160): (((1456, 819), 1560), ((2576, 1449), 4784)),
    (1075, 1520): (((924, 1307), 1551), ((1075, 1520), 2145)),  # the A4 scan at 130 DPI (vision-coordinates)
}


@pytest.mark.parametrize("size", sorted(ANTHROPIC_EXAMPLES))
def test_anthropic_worked_examples(size):
    for spec, (seen, tokens) in zip(("anthropic", "anthropic:high"), ANTHROPIC_EXAMPLES[size]):
        assert one(spec, *size) == Sending(tokens, seen, None), spec
        assert one(spec, size[1], size[0]) == Sending(tokens, seen[::-1], None), spec  # portrait alike


def test_anthropic_resize_is_the_largest_that_fits():
    """Against a slow obvious search: the largest long edge whose size (short side rounded half to even) has 28-padded
    sides within the edge limit and a token cost within the budget."""
    rng = np.random.default_rng(1)
    for spec, (edge, budget) in (("anthropic", (1568, 1568)), ("anthropic:high", (2576, 4784))):
        for w, h in zip(rng.integers(1, 8000, 60), rng.integers(1, 8000, 60)):
            long, short = max(w, h), min(w, h)

            def fits(a, b, edge=edge, budget=budget):
                return -(-a // 28) * 28 <= edge and -(-b // 28) * 28 <= edge and -(-a // 28) * -(-b // 28) <= budget

            if fits(long, short):
                want = long
            else:
                want = max(m for m in range(1, long + 1) if fits(m, max(round(m * short / long), 1)))
            sw, sh = one(spec, int(w), int(h)).seen
            assert max(sw, sh) == want, (spec, w, h)


# -- Gemini 3: a fixed count per picture, by media_resolution ----------------------------------------------------


def test_gemini3_levels():
    """ai.google.dev/gemini-api/docs/media-resolution (read 2026-11-27): 280 / 560 / 1120 / 2240 tokens per image
    whatever its size; the default (unspecified) is HIGH's 1120."""
    rule = get_rule("gemini-3")
    assert rule.options[0] == "high"
    for w, h in [(64, 64), (850, 1100), (4000, 3000)]:
        got = {o: one("gemini-3", w, h, o).tokens for o in rule.options}
        assert got == {"low": 280, "medium": 560, "high": 1120, "ultra_high": 2240}
    low = one("gemini-3", 4000, 3000, "low")
    assert low.seen[0] * low.seen[1] <= 280 * 32 * 32 and abs(low.seen[0] / low.seen[1] - 4 / 3) < 0.01


# -- Gemini, LLaVA, patch:P -----------------------------------------------------------------------------------


def test_gemini_rule():
    assert one("gemini", 384, 384).tokens == 258
    assert one("gemini", 385, 100).tokens == 258  # one 768-px tile
    assert one("gemini", 769, 100).tokens == 516
    assert one("gemini", 1000, 1000).tokens == 4 * 258
    assert one("gemini", 1000, 1000).seen == (1000, 1000)


def test_llava_is_always_576():
    for w, h in [(10, 10), (336, 336), (762, 1000), (4000, 100)]:
        s = one("llava-1.5", w, h)
        assert s.tokens == 576 and max(s.seen) == 336
    assert get_rule("llava-1.5").max_pictures == 1


def test_patch_rule():
    assert one("patch:14", 512, 512) == Sending(37 * 37, (512, 512), None)
    assert one("patch:28", 28, 29).tokens == 2


# -- the registry ---------------------------------------------------------------------------------------------


def test_registry_errors_and_extension():
    assert {"openai", "openai-patch", "anthropic", "gemini", "qwen2-vl", "llava-1.5", "patch"} <= set(list_rules())
    for bad in ("gpt", "patch:abc", "patch:0", "anthropic:x", "openai:gpt-9", "qwen2-vl:abc"):
        with pytest.raises(ConfigError):
            get_rule(bad)
    register_rule("mine", lambda arg: Patches(int(arg or 32)))
    assert get_rule("mine:16").tokens(32, 32) == 4
    assert get_rule(get_rule("gemini")) is get_rule("gemini")


@pytest.mark.parametrize(
    "spec",
    [
        "patch:999999999999999999999999",
        "patch:4097",
        "patch:-3",
        "qwen2-vl:99999999999999999999",
        "qwen2-vl:10",
        "openai:" + "x" * 500,
        "x" * 300,
    ],
)
def test_rule_parameters_are_bounded(spec):
    """A huge patch size was an OverflowError (a 500 from the service, a traceback from the CLI)."""
    with pytest.raises(ConfigError):
        get_rule(spec)


def test_the_rule_cache_is_bounded():
    """Every distinct spec kept a rule (a Qwen2-VL processor and a large LRU each): a few thousand requests with
    distinct ``qwen2-vl:N`` cost a gigabyte."""
    from foveate.vlm.rules import registry

    for n in range(3200, 3200 + 3 * registry.MAX_CACHED):
        get_rule(f"qwen2-vl:{n * 1000}")
    assert len(registry._CACHE) <= registry.MAX_CACHED
    assert get_rule("qwen2-vl:3200000") is get_rule("qwen2-vl:3200000")  # still made once while it is kept
