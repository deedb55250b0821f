"""The request guard: what every HTTP request passes before a route runs.  Pure ASGI, inside the app, so the same
policy holds however the app was started (``foveate serve``, ``uvicorn --factory foveate.service:app_from_env``,
``create_app`` in your own server).  In order, from the request head alone:

1. **head size** -- request line + headers over :data:`MAX_REQUEST_HEAD` answer 431 (uvicorn's own limit only
   counts a head that arrives in pieces);
2. **who may call** -- without an API key and without ``allow_public``, a client whose address (the ASGI
   ``scope["client"]``: the connection's peer, or the forwarded address a trusted proxy reports) is not
   loopback answers 403;
3. **the key** -- with one, every path but the open ones (``/healthz``, the inspector page's files; the docs with
   ``public_docs``) needs ``Authorization: Bearer <key>`` (401), checked before a byte of the body is read;
4. **the body** -- read as a stream under the route's limit (:func:`body_limit`; a ``Content-Length`` over it
   answers before a byte is read): one byte over answers 413, and no more than the limit (plus one network
   chunk) is ever held;
5. **time** -- the whole request runs under ``request_timeout`` (504; 408 when it ran out waiting for the client's
   body, shorter than its ``Content-Length``);
6. **the unexpected** -- an exception no handler mapped answers a JSON 500 (logged, rate-limited) and the
   connection stays usable.

A new route declares its body limit with the :func:`body_limit` decorator (under the route decorator);
everything else here applies to it without a word.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from collections.abc import Callable
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from .metrics import Metrics
from .settings import ServiceSettings, is_loopback

#: request line + headers larger than this answer 431 before routing: a GET rendering's query of 2,000
#: characters of any script fits, URL-encoded
MAX_REQUEST_HEAD = 64 * 1024
#: the body limit of a route that declares none (GET and DELETE routes take no body)
DEFAULT_BODY_LIMIT = 64 * 1024
#: marks a route whose limit is the server's ``--max-upload-mb``
UPLOAD = "upload"
#: the attribute :func:`body_limit` sets on an endpoint
LIMIT_ATTR = "__foveate_body_limit__"
OPEN_PATHS = frozenset({"/healthz"})
#: the inspector page's static files (``routes/inspector.py``): no data, and a browser opening a page sends no key
UI_PATHS = frozenset({"/ui", "/ui/app.js", "/ui/app.css"})
DOCS_PATHS = frozenset({"/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json"})

log = logging.getLogger("foveate.service")


def body_limit(limit: int | str) -> Callable:
    """Declare a route's request body limit in bytes (or :data:`UPLOAD`: the server's ``--max-upload-mb``).
    Put it under the route decorator::

        @router.post("/{tid}/select")
        @body_limit(1 << 20)
        async def select_tokens(...): ...
    """

    def mark(endpoint: Callable) -> Callable:
        setattr(endpoint, LIMIT_ATTR, limit)
        return endpoint

    return mark


class BodyTooLarge(HTTPException):
    """Raised from ``receive`` when a body passes its route's limit (FastAPI passes HTTPExceptions through)."""

    def __init__(self, detail: str) -> None:
        super().__init__(413, detail)


def authorized(headers: dict[bytes, bytes], key: str) -> bool:
    """Whether the ``Authorization`` header carries ``Bearer <key>`` (constant-time comparison)."""
    scheme, _, token = headers.get(b"authorization", b"").decode("latin-1").strip().partition(" ")
    return scheme.lower() == "bearer" and secrets.compare_digest(token.strip().encode("latin-1"), key.encode())


def is_local(scope: dict) -> bool:
    """A request from a loopback client (or over a Unix socket, where the file's permissions decide)."""
    client = scope.get("client")
    if client:
        return is_loopback(str(client[0]))
    server = scope.get("server")
    return server is None or server[1] is None  # Unix socket: (path, None)


def head_bytes(scope: dict) -> int:
    """Bytes of the request head as sent: request line (method, target, version) + header lines."""
    return (
        len(scope.get("method", ""))
        + len(scope.get("raw_path") or scope["path"].encode())
        + len(scope.get("query_string", b""))
        + 12
        + sum(len(k) + len(v) + 4 for k, v in scope.get("headers", ()))
    )


def _mib(n: int) -> str:
    return f"{n / 2**20:g} MiB" if n >= 2**20 else f"{n / 2**10:g} KiB"


class Guard:
    def __init__(self, app, settings: ServiceSettings, metrics: Metrics) -> None:
        self.app = app
        self.settings = settings
        self.upload_limit = int(settings.max_upload_mb * 2**20)
        self.timeout = settings.request_timeout
        self.metrics = metrics
        self.open_paths = OPEN_PATHS | UI_PATHS | (DOCS_PATHS if settings.public_docs else frozenset())

    def route_limit(self, scope: dict) -> tuple[int, str]:
        """(body limit in bytes, what to do about it) of the route this request was routed to (routing sets
        ``scope["route"]`` before the endpoint reads the body)."""
        endpoint = getattr(scope.get("route"), "endpoint", None)
        limit = getattr(endpoint, LIMIT_ATTR, DEFAULT_BODY_LIMIT)
        if limit == UPLOAD:
            return self.upload_limit, (
                "send a smaller (downscaled or recompressed) image, or raise the server's --max-upload-mb"
            )
        return int(limit), "this route takes a small body; send less"

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        state: dict[str, Any] = {"status": 500, "started": False, "received": 0, "body_done": False, "waiting": False}
        headers = dict(scope["headers"])
        length = headers.get(b"content-length", b"")
        declared = int(length) if length.isdigit() else None
        has_body = bool(declared) or b"transfer-encoding" in headers

        async def send_tracked(message) -> None:
            if message["type"] == "http.response.start":
                state["started"], state["status"] = True, message["status"]
                if has_body and not state["body_done"]:
                    # answered before the whole body arrived (a refusal from the head, a body over its limit, a route
                    # that did not read it): close, rather than keep the connection to read and drop the rest
                    raw = list(message.get("headers", ()))
                    if not any(k.lower() == b"connection" for k, _ in raw):
                        message = {**message, "headers": [*raw, (b"connection", b"close")]}
            await send(message)

        async def refuse(status: int, reason: str, detail: str, headers: dict | None = None) -> None:
            self.metrics.rejected.labels(reason).inc()
            await send_json(send_tracked, status, {"detail": detail}, headers)

        try:
            if head_bytes(scope) > MAX_REQUEST_HEAD:
                return await refuse(
                    431,
                    "head_too_large",
                    f"the request line and headers are over "
                    f"{_mib(MAX_REQUEST_HEAD)}; send a shorter URL (POST the select body for long "
                    "queries) and fewer or smaller headers",
                )
            key = self.settings.api_key
            if key is None and not self.settings.allow_public and not is_local(scope):
                return await refuse(
                    403,
                    "not_loopback",
                    "this server has no API key and serves loopback clients "
                    "only; its operator can set FOVEATE_API_KEY (clients then send 'Authorization: "
                    "Bearer <key>'), or FOVEATE_ALLOW_PUBLIC=1 / --allow-public when a proxy in "
                    "front of it authenticates",
                )
            if key is not None and scope["path"] not in self.open_paths and not authorized(headers, key):
                return await refuse(
                    401,
                    "unauthorized",
                    "missing or wrong API key: send 'Authorization: Bearer <key>' with the server's FOVEATE_API_KEY",
                    {"WWW-Authenticate": "Bearer"},
                )
            if declared is not None and declared > max(self.upload_limit, DEFAULT_BODY_LIMIT):
                return await refuse(
                    413,
                    "too_large",
                    f"the request body is over every route's limit (uploads: "
                    f"{_mib(self.upload_limit)}); send a smaller image, or raise the server's "
                    "--max-upload-mb",
                )
            limit: list[int] = []

            async def receive_limited():
                if not limit:  # the first read: routed by now, nothing read yet
                    lim, hint = self.route_limit(scope)
                    limit[:] = [lim]
                    state["too_large"] = (
                        f"the request body is over this route's limit of {_mib(lim)} "
                        f"({scope['method']} {scope['path']}); {hint}"
                    )
                    if declared is not None and declared > lim:
                        raise BodyTooLarge(state["too_large"])
                # waiting for the client's next body bytes (not for a disconnect after them): a timeout now is theirs
                state["waiting"] = not state["body_done"]
                message = await receive()
                state["waiting"] = False
                if message["type"] == "http.request":
                    state["received"] += len(message.get("body", b""))
                    if state["received"] > limit[0]:
                        raise BodyTooLarge(state["too_large"])
                    state["body_done"] = not message.get("more_body", False)
                elif message["type"] == "http.disconnect":
                    state["body_done"] = True
                return message

            await asyncio.wait_for(self.app(scope, receive_limited, send_tracked), self.timeout)
        except TimeoutError:
            self.metrics.rejected.labels("timeout").inc()
            if state["waiting"] and not state["started"]:  # the body stopped short of its Content-Length
                await send_json(
                    send_tracked,
                    408,
                    {
                        "detail": f"the request body did not arrive within {self.timeout:g} s (it stopped "
                        f"after {state['received']} bytes); send the whole body, as long as its Content-Length says"
                    },
                )
            elif not state["started"]:
                await send_json(
                    send_tracked,
                    504,
                    {
                        "detail": f"the request took longer than {self.timeout:g} s and was stopped; retry later (an "
                        "upload that was received is still encoded and stored: the retry then answers 200)"
                    },
                )
        except BodyTooLarge as exc:  # raised where no handler saw it
            self.metrics.rejected.labels("too_large").inc()
            if not state["started"]:
                await send_json(send_tracked, 413, {"detail": exc.detail})
        except ClientDisconnect:  # the client went away mid-body: nobody to answer, nothing to log
            self.metrics.rejected.labels("disconnected").inc()
        except Exception as exc:  # a bug: answer JSON, keep the connection, log it (rate-limited)
            log.error(
                "unhandled error in %s %s: %s: %s",
                scope["method"],
                scope["path"],
                type(exc).__name__,
                exc,
                exc_info=exc,
            )
            if not state["started"]:
                await send_json(
                    send_tracked, 500, {"detail": f"internal error ({type(exc).__name__}); it was logged on the server"}
                )
        finally:
            route = scope.get("route")
            name = getattr(route, "path", "unmatched")
            self.metrics.requests.labels(scope["method"], name, str(state["status"])).inc()
            self.metrics.latency.labels(scope["method"], name).observe(time.perf_counter() - t0)


async def send_json(send, status: int, body: dict, headers: dict | None = None) -> None:
    payload = json.dumps(body).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": payload})
