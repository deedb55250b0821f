"""Hand a selection to a real VLM: each provider's own token rule, crop plans that never cost more than the whole
image, and request bodies ready to post.

* ``rules`` -- the registry of VLM input rules (:func:`get_rule`: ``openai``, ``openai-patch``, ``anthropic``,
  ``gemini``, ``qwen2-vl``, ``llava-1.5``, ``patch:P``): how each model resizes a picture, what it bills, its limits.
* ``qwen`` -- Qwen2-VL through transformers' own image processor (imported only when used).
* ``plan`` -- the crop planner (:func:`plan_for`: a :class:`Selection` and a rule in, a :class:`Plan` out).
* ``pictures`` -- the plan's pixels: as sent, as the model sees them, and back at the source size.
* ``payload`` -- :func:`build_request`: OpenAI / Anthropic / Gemini JSON bodies, Qwen2-VL processor inputs, and the
  token ledger (plan vs whole image vs a uniform resize).
"""

from .payload import Request, build_body, build_request, picture_line
from .pictures import cut_picture, cut_pictures, seen_view, source_view
from .plan import PICTURE_TEXT_TOKENS, Picture, Plan, plan_for, plan_tokens, price_regions, uniform_picture
from .rules import Sending, VlmRule, get_rule, list_rules, register_rule

__all__ = ["PICTURE_TEXT_TOKENS", "Picture", "Plan", "Request", "Sending", "VlmRule", "build_body", "build_request",
           "cut_picture", "cut_pictures", "get_rule", "list_rules", "picture_line", "plan_for", "plan_tokens",
           "price_regions", "register_rule", "seen_view", "source_view", "uniform_picture"]
