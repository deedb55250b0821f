"""Hand a selection to a real VLM: each provider's own token rule, crop plans that never cost more than the whole
image, and request bodies ready to post.

* ``rules`` -- the VLM input rules, one module per provider, and their registry (:func:`get_rule`: ``openai``,
  ``openai-patch``, ``anthropic``, ``gemini``, ``qwen2-vl``, ``llava-1.5``, ``patch:P``): how each model resizes a
  picture, what it bills, its limits, its request format (Qwen2-VL through transformers' own image processor).
* ``formats`` -- the request bodies: OpenAI chat completions, Anthropic messages, Gemini generateContent, and the
  chat-template messages of a local model's processor.
* ``plan`` -- the crop planner (:func:`plan_for`: a :class:`Selection` and a rule in, a :class:`Plan` out), whose
  search (what a region costs, how tokens group into crops) is ``crops``.
* ``pictures`` -- the plan's pixels: as sent, as the model sees them, and back at the source size.
* ``models`` -- the model table: the model a user calls (``claude-opus-4-7``, ``gpt-5.2``, ``gemini-3-flash-preview``,
  ``Qwen/Qwen3-VL-8B-Instruct``) -> the rule its provider bills pictures by (:func:`model_rule`, :func:`resolve`).
* ``compose`` -- composite pictures: several crops packed into one picture where the price is per picture.
* ``payload`` -- :func:`build_request`: OpenAI / Anthropic / Gemini JSON bodies, Qwen2-VL processor inputs, and the
  token ledger (plan vs whole image vs a uniform resize).

Names load on first use (:mod:`foveate._lazy`): the rules need NumPy only.
"""

from .._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        **{n: ".payload" for n in ("Request", "build_body", "build_request", "picture_line")},
        **{n: ".pictures" for n in ("cut_picture", "cut_pictures", "seen_view", "source_view")},
        **{
            n: ".plan"
            for n in (
                "PICTURE_TEXT_TOKENS",
                "Plan",
                "plan_for",
                "plan_tokens",
                "uniform_picture",
            )
        },
        "price_regions": ".crops",
        **{n: ".models" for n in ("ModelError", "ModelRow", "list_models", "model_row", "model_rule", "resolve")},
        **{n: ".picture" for n in ("Part", "Picture")},
        **{n: ".rules" for n in ("Sending", "VlmRule", "get_rule", "list_rules", "register_rule", "rules_help")},
    },
)
