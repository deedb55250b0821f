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
    nano = get_rule("openai-patch:gpt-4.1-nano")
    mini = get_rule("openai-patch")
    # 1024 x 1024: 32 x 32 = 1024 patches, below the cap
    assert mini.sendings(1024, 1024)[0] == Sending(int(np.ceil(1024 * 1.62)), (1024, 1024), None)
    # 1800 x 2400: 57 x 75 = 4275 patches -> shrink 0.603 -> 1086 x 1448 -> width to 33 patches -> 1056 x 1408 = 1452
    s = mini.sendings(1800, 2400)[0]
    assert s.seen == (1056, 1408)
    assert s.tokens == int(np.ceil(1452 * 1.62))
    assert nano.tokens(1800, 2400) == int(np.ceil(1452 * 2.46))
    assert get_rule("openai-patch:o4-mini").tokens(32, 32) == 2  # 1 patch x 1.72, rounded up


def test_openai_patch_never_over_the_cap():
    rule = get_rule("openai-patch:gpt-4.1-nano")
    rng = np.random.default_rng(0)
    w, h = rng.integers(1, 9000, 2000), rng.integers(1, 9000, 2000)
    t, sw, sh = rule.price(w, h)
    assert (t <= np.ceil(1536 * 2.46)).all()
    assert ((sw <= w) & (sh <= h)).all()


# -- Anthropic ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("w, h", [(1092, 1092), (951, 1268), (896, 1344), (819, 1456), (784, 1568)])
def test_anthropic_table_sizes_are_not_resized(w, h):
    for ww, hh in ((w, h), (h, w)):
        assert one("anthropic", ww, hh).seen == (ww, hh)


def test_anthropic_worked_costs_and_resize():
    assert one("anthropic", 200, 200).tokens == 54
    assert one("anthropic", 1000, 1000).tokens == 1334
    assert one("anthropic", 1092, 1092).tokens == 1590
    # over the limits: shrunk, aspect kept, within the long edge and the 28-px patch cap
    for w, h in [(1093, 1093), (4000, 3000), (8000, 200), (1600, 10)]:
        sw, sh = one("anthropic", w, h).seen
        assert max(sw, sh) <= 1568 and -(-sw // 28) * -(-sh // 28) <= 1568
        assert abs(sh - h * sw / w) <= 1  # aspect kept, up to rounding
    assert one("anthropic", 1093, 1093).seen == (1092, 1092)


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
