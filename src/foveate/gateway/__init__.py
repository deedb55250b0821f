"""``foveate gateway``: foveate in front of an OpenAI- or Anthropic-compatible VLM API, with no change to the client
but its base URL.  The pictures of each request's latest user turn are encoded once (cache keyed by content), selected
for the turn's question and re-planned under the request's model's own token rule; everything else passes through.

    from foveate.gateway import create_app
    app = create_app(upstream="https://api.openai.com")      # an ASGI app: mount it, or run it with uvicorn

Modules: ``settings`` (flags and ``FOVEATE_*``), ``rewrite`` (each provider's message format), ``replan`` (one
picture -> its planned pictures), ``cache`` (encode once, single flight), ``upstream`` (forward and relay),
``errors`` (the providers' error shapes, the guard), ``fetch`` (pictures by URL from listed hosts), ``metrics``,
``app``.
"""

from .._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__, {"create_app": ".app", "app_from_env": ".app", "GatewaySettings": ".settings"}
)
