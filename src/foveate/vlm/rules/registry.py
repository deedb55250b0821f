"""The VLM-rule registry: every rule a spec (``--vlm``, the service's ``vlm`` field) can name.

The built-in rules are registered here, one line each.  A new rule is one module defining a
:class:`~.base.VlmRule` (its price, its limits, its request format) and one :func:`register_rule` line; help texts,
benchmarks and the contract tests read the registry (:func:`list_rules`, :func:`rule_examples`,
:func:`rules_help`).

A spec is ``NAME`` or ``NAME:ARG``: ``openai:gpt-4o-mini``, ``openai-patch:gpt-4.1-nano``, ``qwen2-vl:12845056``
(max_pixels), ``patch:14``.  Rules are made once per spec and kept (at most :data:`MAX_CACHED`, the least recently
used dropped: a server answering many distinct specs stays bounded).
"""

from __future__ import annotations

import importlib
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...core.errors import ConfigError

if TYPE_CHECKING:
    from .base import VlmRule

#: rules kept made, by spec
MAX_CACHED = 64
#: longest spec read (longer ones are refused before any parsing)
MAX_SPEC_CHARS = 200


@dataclass(frozen=True)
class RuleEntry:
    """A registered rule.

    Attributes:
        name: the spec's name part.
        factory: ``factory(arg)`` makes the rule from the spec's part after ``name:`` (``None`` without one).
        argument: what the part after ``name:`` is (``"MODEL"``, ``"P"``; the factory reads it), ``None`` where the
            rule takes none.
        required: the argument must be given (``patch:P``).
        example: a spec of this rule for tests, benchmarks and help (default: the name).
    """

    name: str
    factory: Callable[[str | None], VlmRule]
    argument: str | None = "ARG"
    required: bool = False
    example: str = ""

    @property
    def usage(self) -> str:
        """``name``, ``name[:ARG]`` or ``name:ARG``."""
        if self.argument is None:
            return self.name
        return f"{self.name}:{self.argument}" if self.required else f"{self.name}[:{self.argument}]"


_RULES: dict[str, RuleEntry] = {}
_CACHE: OrderedDict[str, VlmRule] = OrderedDict()
_LOCK = threading.Lock()


def register_rule(
    name: str,
    factory: Callable[[str | None], VlmRule],
    *,
    argument: str | None = "ARG",
    required: bool = False,
    example: str | None = None,
) -> RuleEntry:
    """Add (or replace) a rule: ``factory(arg)`` makes it from the spec's part after ``name:`` (see
    :class:`RuleEntry`)."""
    entry = RuleEntry(name, factory, argument, required, example or name)
    with _LOCK:
        _RULES[name] = entry
        for key in [k for k in _CACHE if k.split(":", 1)[0] == name]:
            del _CACHE[key]
    return entry


def list_rules() -> list[str]:
    """The registered rule names."""
    return list(_RULES)


def rule_entries() -> list[RuleEntry]:
    """The registered rules, in registration order."""
    return list(_RULES.values())


def rule_examples() -> list[str]:
    """One spec per registered rule (``patch:14`` for ``patch``)."""
    return [e.example for e in _RULES.values()]


def rules_help() -> str:
    """The specs for a help text: ``openai[:MODEL], openai-patch[:MODEL], anthropic, ...``."""
    return ", ".join(e.usage for e in _RULES.values())


def get_rule(spec: str | VlmRule) -> VlmRule:
    """A rule from its spec (see the module docstring); a :class:`VlmRule` is returned as is.  An unknown name, an
    argument the rule does not take, or a bad argument is a :class:`~foveate.core.errors.ConfigError`."""
    if not isinstance(spec, str):
        from .base import VlmRule

        if isinstance(spec, VlmRule):
            return spec
    if not isinstance(spec, str) or len(spec) > MAX_SPEC_CHARS:
        raise ConfigError(
            f"a VLM rule spec is a short string such as 'openai' or 'patch:14', got "
            f"{str(spec)[:40]!r}{'...' if len(str(spec)) > 40 else ''}"
        )
    key = spec.strip().lower()
    with _LOCK:
        rule = _CACHE.get(key)
        if rule is not None:
            _CACHE.move_to_end(key)
            return rule
        name, _, arg = key.partition(":")
        entry = _RULES.get(name)
    if entry is None:
        raise ConfigError(f"unknown VLM rule {spec!r}; known: {rules_help()}")
    if arg and entry.argument is None:
        raise ConfigError(f"{name} takes no argument, got {spec!r}")
    if not arg and entry.required:
        raise ConfigError(f"{name} needs an argument: {entry.usage}")
    rule = entry.factory(arg or None)
    with _LOCK:
        _CACHE[key] = rule
        while len(_CACHE) > MAX_CACHED:
            _CACHE.popitem(last=False)
    return rule


def _builtin(module: str, name: str, make: Callable[[Any, str | None], VlmRule]) -> Callable[[str | None], VlmRule]:
    """A factory for the rule class ``name`` of the sibling ``module``, imported on first use: the registry (and
    with it every help text that lists the rules) loads no NumPy."""

    def factory(arg: str | None) -> VlmRule:
        return make(getattr(importlib.import_module(module, __package__), name), arg)

    return factory


def _patch(cls: Any, arg: str | None) -> VlmRule:
    try:
        size = int(arg or "")
    except ValueError:
        raise ConfigError(f"patch:P needs a whole number of pixels, got {arg!r}") from None
    rule: VlmRule = cls(size)
    return rule


# ----------------------------------------------------------------------------------------------------------
# The built-in rules

register_rule("openai", _builtin(".openai", "OpenAITiles", lambda c, a: c(a or "gpt-4o")), argument="MODEL")
register_rule(
    "openai-patch", _builtin(".openai", "OpenAIPatches", lambda c, a: c(a or "gpt-4.1-mini")), argument="MODEL"
)
register_rule("anthropic", _builtin(".anthropic", "Anthropic", lambda c, a: c(a or "standard")), argument="TIER")
register_rule("gemini", _builtin(".gemini", "Gemini", lambda c, a: c()), argument=None)
register_rule("gemini-3", _builtin(".gemini", "Gemini3", lambda c, a: c()), argument=None)
register_rule("qwen2-vl", _builtin(".qwen", "Qwen2VL", lambda c, a: c(a)), argument="MAX_PIXELS")
register_rule("qwen2.5-vl", _builtin(".qwen", "Qwen2VL", lambda c, a: c(a, "qwen2.5-vl")), argument="MAX_PIXELS")
register_rule("qwen3-vl", _builtin(".qwen", "Qwen2VL", lambda c, a: c(a, "qwen3-vl")), argument="MAX_PIXELS")
register_rule("llava-1.5", _builtin(".llava", "Llava15", lambda c, a: c()), argument=None)
register_rule("patch", _builtin(".patch", "Patches", _patch), argument="P", required=True, example="patch:14")
