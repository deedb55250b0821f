"""The model table: the model a user calls -> the rule its provider bills pictures by.  Data, not code branches: each
row is a name pattern, a rule spec of :mod:`.rules.registry` (which carries the model's parameters: tier, multiplier,
budgets, levels, patch size), and the document (and the date it was read) the row follows.  The first matching row
wins, so exact names and narrow families come before wide ones.

    rule = model_rule("claude-opus-4-7")     # the rule for a model name; ModelError lists the families if unknown
    foveate models                           # the table
"""

from __future__ import annotations

import fnmatch
import threading
from collections import OrderedDict
from dataclasses import dataclass

from ..core.errors import ConfigError
from .rules.anthropic import VISION
from .rules.base import VlmRule
from .rules.gemini import MEDIA_RESOLUTION
from .rules.openai import GUIDE
from .rules.registry import get_rule

READ = "2026-11-27"
GEMINI_TOKENS = "https://ai.google.dev/gemini-api/docs/tokens"
QWEN = "https://huggingface.co/docs/transformers/model_doc/"
LLAVA = "https://huggingface.co/docs/transformers/model_doc/llava"


@dataclass(frozen=True)
class ModelRow:
    """One row: model names matching ``pattern`` (``fnmatch``, case-insensitive) are billed by the rule ``rule``.

    Attributes:
        pattern: ``claude-opus-4-7*``, ``gpt-5.4*``, ``qwen/qwen3-vl-*``.
        rule: a rule spec (``anthropic:high``, ``openai-patch:gpt-5.4``, ``gemini-3``, ``qwen3-vl``).
        family: what the row is about, for listings and errors.
        source: the document the row follows; ``read``: the date it was read.
    """

    pattern: str
    rule: str
    family: str
    source: str
    read: str = READ


def _openai(pattern: str, model: str, family: str) -> ModelRow:
    kind = "openai-patch" if model not in _TILE else "openai"
    return ModelRow(pattern, f"{kind}:{model}", family, f"{GUIDE}#calculating-costs")


_TILE = {"gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-4o-mini", "o1", "o1-pro", "o3", "gpt-5", "gpt-5.1", "gpt-5-chat-latest"}

MODELS: tuple[ModelRow, ...] = (
    # Anthropic: "Claude 4.7 and later models" are high-resolution (2576 px, 4784 tokens), "All other models" standard
    *(
        ModelRow(f"claude-{name}-{version}*", "anthropic:high", "Claude 4.7 and later (high resolution)", VISION)
        for name in ("opus", "sonnet", "haiku", "fable", "mythos")
        for version in ("4-7", "4-8", "4-9", "5", "6")
    ),
    ModelRow("claude-*", "anthropic", "Claude (standard resolution)", VISION),
    # OpenAI: patch models (per-model multipliers, budgets and detail levels), then the tile models
    *(
        _openai(f"{m}*", m, "GPT-5.6 (patches, original detail)")
        for m in ("gpt-5.6-sol", "gpt-5.6-terra", "gpt-5.6-luna")
    ),
    _openai("gpt-5.6", "gpt-5.6-sol", "GPT-5.6 (patches, original detail)"),
    _openai("gpt-5.5*", "gpt-5.5", "GPT-5.5 (patches, original detail)"),
    *(_openai(f"{m}*", m, "GPT-5.4 (patches)") for m in ("gpt-5.4-mini", "gpt-5.4-nano", "gpt-5.4")),
    _openai("gpt-5.2*", "gpt-5.2", "GPT-5.2 (patches)"),
    _openai("gpt-5-mini*", "gpt-5-mini", "GPT-5 mini (patches)"),
    _openai("gpt-5-nano*", "gpt-5-nano", "GPT-5 nano (patches)"),
    _openai("gpt-5.1*", "gpt-5.1", "GPT-5.1 (tiles)"),
    _openai("gpt-5-chat*", "gpt-5-chat-latest", "GPT-5 (tiles)"),
    _openai("gpt-5", "gpt-5", "GPT-5 (tiles)"),
    _openai("gpt-5-2*", "gpt-5", "GPT-5 (tiles)"),
    _openai("gpt-4.1-mini*", "gpt-4.1-mini", "GPT-4.1 mini (patches)"),
    _openai("gpt-4.1-nano*", "gpt-4.1-nano", "GPT-4.1 nano (patches)"),
    _openai("o4-mini*", "o4-mini", "o4-mini (patches)"),
    _openai("gpt-4o-mini*", "gpt-4o-mini", "GPT-4o mini (tiles)"),
    _openai("gpt-4o*", "gpt-4o", "GPT-4o (tiles)"),
    _openai("gpt-4.1*", "gpt-4.1", "GPT-4.1 (tiles)"),
    _openai("gpt-4.5*", "gpt-4.5", "GPT-4.5 (tiles)"),
    _openai("o1-pro*", "o1-pro", "o1 pro (tiles)"),
    _openai("o1*", "o1", "o1 (tiles)"),
    _openai("o3*", "o3", "o3 (tiles)"),
    # Google: Gemini 3 bills a fixed count per picture by its media_resolution; 2.x and 1.5 by 768-px tiles
    ModelRow("gemini-3*", "gemini-3", "Gemini 3 (media_resolution per picture)", MEDIA_RESOLUTION),
    ModelRow("gemini-2*", "gemini", "Gemini 2.x (768-px tiles)", GEMINI_TOKENS),
    ModelRow("gemini-1.5*", "gemini", "Gemini 1.5 (768-px tiles)", GEMINI_TOKENS),
    # open models, by their Hugging Face ids: transformers' own processors
    ModelRow("qwen/qwen3-vl-*", "qwen3-vl", "Qwen3-VL (32-px tokens)", f"{QWEN}qwen3_vl"),
    ModelRow("qwen/qwen2.5-vl-*", "qwen2.5-vl", "Qwen2.5-VL (28-px tokens)", f"{QWEN}qwen2_5_vl"),
    ModelRow("qwen/qwen2-vl-*", "qwen2-vl", "Qwen2-VL (28-px tokens)", f"{QWEN}qwen2_vl"),
    ModelRow("llava-hf/llava-1.5-*", "llava-1.5", "LLaVA-1.5 (one 336-px picture)", LLAVA),
)

#: rules made per model name, kept (bounded like the rule registry's)
MAX_CACHED = 64
_CACHE: OrderedDict[str, VlmRule] = OrderedDict()
_LOCK = threading.Lock()


class ModelError(ConfigError):
    """A model name the table does not know."""


def model_row(name: str) -> ModelRow:
    """The first row matching ``name`` -- also behind a provider prefix (``openrouter/anthropic/claude-opus-4-7``)."""
    key = str(name).strip().lower()
    parts = key.split("/")
    for start in range(len(parts)):
        candidate = "/".join(parts[start:])
        for row in MODELS:
            if fnmatch.fnmatchcase(candidate, row.pattern):
                return row
    families = sorted({row.family.split(" (")[0] for row in MODELS})
    raise ModelError(
        f"unknown model {name!r}: known families are {', '.join(families)} (foveate models lists the names); for "
        "another model pass its provider's rule explicitly, e.g. --vlm anthropic --model NAME"
    )


def model_rule(name: str) -> VlmRule:
    """The rule that bills pictures for the model ``name``, with ``name`` as the request's model."""
    key = str(name).strip()
    with _LOCK:
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]
    row = model_row(key)
    rule = _named(get_rule(row.rule), key, row)
    with _LOCK:
        _CACHE[key] = rule
        while len(_CACHE) > MAX_CACHED:
            _CACHE.popitem(last=False)
    return rule


def _named(rule: VlmRule, model: str, row: ModelRow) -> VlmRule:
    """A copy of ``rule`` whose request names ``model`` and whose source is the row's."""
    import copy

    out = copy.copy(rule)
    out.default_model = model
    out.source = f"{row.source} (read {row.read})"
    return out


def list_models() -> list[ModelRow]:
    return list(MODELS)


def resolve(vlm: VlmRule | str | None, model: str | None) -> tuple[VlmRule, str]:
    """The rule and the model name of a request: ``model`` alone picks the rule from the table; ``vlm`` (a rule spec
    or a rule) is used as given, with ``model`` (if any) written into the body; neither: the ``openai`` rule."""
    if vlm is None and model:
        rule = model_rule(model)
        return rule, rule.default_model
    rule = get_rule(vlm if vlm is not None else "openai")
    return rule, model or rule.default_model
