"""The gateway's own answers in each provider's error shape, so that the client's SDK raises its usual exception:

* OpenAI: ``{"error": {"message": ..., "type": "invalid_request_error", "param": null, "code": null}}``;
* Anthropic (``/v1/messages``): ``{"type": "error", "error": {"type": "invalid_request_error", "message": ...}}``.

And the guard every request passes first (pure ASGI): who may call (loopback without a key, as ``foveate serve``),
the gateway's key (``x-foveate-key``), and a declared body length over the limit (413 before a byte is read).
"""

from __future__ import annotations

import json
import secrets

from starlette.responses import Response

from ..service.guard import is_local
from .settings import KEY_HEADER, GatewaySettings

#: error ``type`` by status: Anthropic's names (https://docs.anthropic.com/en/api/errors), OpenAI's where they differ
ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    502: "api_error",
    504: "timeout_error",
}
OPENAI_TYPES = {**ANTHROPIC_TYPES, 413: "invalid_request_error", 502: "server_error", 504: "timeout"}
OPEN_PATHS = frozenset({"/healthz"})


def is_anthropic(path: str) -> bool:
    return path.startswith("/v1/messages")


def error_body(path: str, status: int, message: str) -> bytes:
    """The error JSON of the provider whose route ``path`` is."""
    if is_anthropic(path):
        kind = ANTHROPIC_TYPES.get(status, "api_error")
        return json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()
    kind = OPENAI_TYPES.get(status, "server_error")
    return json.dumps({"error": {"message": message, "type": kind, "param": None, "code": None}}).encode()


def error_response(path: str, status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return Response(error_body(path, status, message), status, headers=headers, media_type="application/json")


class GatewayGuard:
    """Bind policy, key, path and body size, from the request head alone, before any route runs."""

    def __init__(self, app, settings: GatewaySettings) -> None:
        self.app = app
        self.settings = settings

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        headers = dict(scope["headers"])
        key = self.settings.api_key
        refusal: tuple[int, str, dict[str, str]] | None = None
        if key is None and not self.settings.allow_public and not is_local(scope):
            refusal = (
                403,
                "this gateway has no API key and serves loopback clients only; its operator can set FOVEATE_API_KEY "
                f"(clients then send '{KEY_HEADER}: <key>'), or --allow-public when a proxy in front authenticates",
                {},
            )
        elif key is not None and path not in OPEN_PATHS:
            given = headers.get(KEY_HEADER.encode(), b"").decode("latin-1").strip()
            if not secrets.compare_digest(given.encode("latin-1"), key.encode()):
                refusal = (401, f"missing or wrong gateway key: send '{KEY_HEADER}: <key>' (FOVEATE_API_KEY)", {})
        if refusal is None and any(part in (".", "..") for part in path.split("/")):
            # the path goes to the upstream after its base: a dot segment would climb out of it (httpx resolves them)
            refusal = (400, "the request path may not hold '.' or '..' segments", {})
        length = headers.get(b"content-length", b"")
        if refusal is None and length.isdigit() and int(length) > self.settings.max_body:
            refusal = (
                413,
                f"the request body is over the gateway's limit of {self.settings.max_body_mb:g} MiB; send smaller "
                "pictures, or raise --max-body-mb",
                {"connection": "close"},
            )
        if refusal is not None:
            status, message, extra = refusal
            await error_response(path, status, message, extra)(scope, receive, send)
            return
        await self.app(scope, receive, send)
