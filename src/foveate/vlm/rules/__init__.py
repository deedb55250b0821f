"""VLM input rules: how each model resizes a picture, what it bills for it, its limits, and the request body its
provider takes -- one module per provider (``openai``, ``anthropic``, ``gemini``, ``qwen``, ``llava``, ``patch``), the
type in ``base`` and the registry in ``registry`` (:func:`get_rule`: ``openai``, ``openai-patch``, ``anthropic``,
``gemini``, ``qwen2-vl``, ``llava-1.5``, ``patch:P``).  The worked examples of each provider's document are the tests
(``tests/vlm/test_rules.py``).

Names load on first use (:mod:`foveate._lazy`): the registry and its help text need no NumPy."""

from ..._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "Anthropic": ".anthropic",
        "Sending": ".base",
        "VlmRule": ".base",
        "Gemini": ".gemini",
        "Gemini3": ".gemini",
        "Llava15": ".llava",
        **{n: ".openai" for n in ("OPENAI_PATCH_MODELS", "OPENAI_TILE_MODELS", "OpenAIPatches", "OpenAITiles")},
        "Patches": ".patch",
        "Qwen2VL": ".qwen",
        **{
            n: ".registry"
            for n in ("RuleEntry", "get_rule", "list_rules", "register_rule", "rule_entries", "rule_examples")
        },
        "rules_help": ".registry",
    },
)
