"""VLM input rules: how each model resizes a picture, what it bills for it, its limits, and the request body its
provider takes -- one module per provider (``openai``, ``anthropic``, ``gemini``, ``qwen``, ``llava``, ``patch``), the
type in ``base`` and the registry in ``registry`` (:func:`get_rule`: ``openai``, ``openai-patch``, ``anthropic``,
``gemini``, ``qwen2-vl``, ``llava-1.5``, ``patch:P``).  The worked examples of each provider's document are the tests
(``tests/vlm/test_rules.py``)."""

from .anthropic import Anthropic
from .base import Sending, VlmRule
from .gemini import Gemini
from .llava import Llava15
from .openai import OPENAI_PATCH_MODELS, OPENAI_TILE_MODELS, OpenAIPatches, OpenAITiles
from .patch import Patches
from .registry import RuleEntry, get_rule, list_rules, register_rule, rule_entries, rule_examples, rules_help

__all__ = [
    "OPENAI_PATCH_MODELS",
    "OPENAI_TILE_MODELS",
    "Anthropic",
    "Gemini",
    "Llava15",
    "OpenAIPatches",
    "OpenAITiles",
    "Patches",
    "RuleEntry",
    "Sending",
    "VlmRule",
    "get_rule",
    "list_rules",
    "register_rule",
    "rule_entries",
    "rule_examples",
    "rules_help",
]
