"""A stand-in for the hosted providers, which are not reachable from the tests: a small Starlette app on loopback,
run by uvicorn in a thread, that records every request it receives (method, path, headers, body bytes) and answers in
the provider's own wire format -- OpenAI chat completions (JSON, or ``chat.completion.chunk`` server-sent events
ending ``data: [DONE]``), OpenAI responses, Anthropic messages (JSON, or the ``message_start`` ...
``message_stop`` event stream), ``GET /v1/models``.  A request header ``x-test-answer`` makes it answer otherwise:
``429`` (with ``retry-after`` and ``x-ratelimit-*`` headers and the provider's error body), ``500``, or ``slow``
(it waits 5 s before answering).

:class:`PictureHost` is a loopback web server for the gateway's picture fetches: it serves the form page, pictures
too large, a redirect to another host name, and records every path it is asked for."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from dataclasses import dataclass
from typing import Self

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

RATE_HEADERS = {"retry-after": "7", "x-ratelimit-remaining-requests": "0", "x-ratelimit-limit-requests": "60"}
SLOW_S = 5.0


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> dict:
        return json.loads(self.body)


def _error(path: str, status: int, message: str) -> dict:
    if path.startswith("/v1/messages"):
        kind = "rate_limit_error" if status == 429 else "api_error"
        return {"type": "error", "error": {"type": kind, "message": message}}
    kind = "rate_limit_exceeded" if status == 429 else "server_error"
    return {"error": {"message": message, "type": kind, "param": None, "code": kind}}


def _reply_text(body: dict) -> str:
    """What the stand-in model 'answers': how many pictures and text parts it received (the tests compare)."""
    text = json.dumps(body)
    n = text.count(";base64,") + text.count('"type": "base64"')
    return f"received {n} pictures"


def _chat(body: dict) -> dict:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", ""),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": _reply_text(body), "refusal": None},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
    }


def _chat_stream(body: dict):
    words = _reply_text(body).split(" ")
    base = {"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 0, "model": body.get("model", "")}
    for i, w in enumerate(words):
        delta = {"role": "assistant", "content": w} if i == 0 else {"content": " " + w}
        yield f"data: {json.dumps({**base, 'choices': [{'index': 0, 'delta': delta, 'finish_reason': None}]})}\n\n"
    yield f"data: {json.dumps({**base, 'choices': [{'index': 0, 'delta': {}, 'finish_reason': 'stop'}]})}\n\n"
    yield "data: [DONE]\n\n"


def _message(body: dict) -> dict:
    return {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", ""),
        "content": [{"type": "text", "text": _reply_text(body)}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 3},
    }


def _message_stream(body: dict):
    def event(kind: str, data: dict) -> str:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"

    msg = {**_message(body), "content": [], "stop_reason": None}
    yield event("message_start", {"message": msg})
    yield event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
    for i, w in enumerate(_reply_text(body).split(" ")):
        yield event(
            "content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": (" " if i else "") + w}}
        )
    yield event("content_block_stop", {"index": 0})
    yield event(
        "message_delta", {"delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": 3}}
    )
    yield event("message_stop", {})


def _response(body: dict) -> dict:
    return {
        "id": "resp_test",
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "model": body.get("model", ""),
        "output": [
            {
                "type": "message",
                "id": "msg_test",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": _reply_text(body), "annotations": []}],
            }
        ],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }


class _Loopback:
    """A Starlette app served by uvicorn in a thread on a free loopback port, for a ``with`` block."""

    def __init__(self, routes: list[Route]) -> None:
        # bound here and handed to uvicorn: no other process can take the port between choosing and binding it
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.socket.bind(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        config = uvicorn.Config(Starlette(routes=routes), host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True)

    def __enter__(self) -> Self:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.socket.close()


class Provider(_Loopback):
    """The stand-in provider on a free loopback port; ``received`` lists what it was sent, oldest first."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        super().__init__(
            [
                Route("/v1/chat/completions", self.answer, methods=["POST"]),
                Route("/v1/responses", self.answer, methods=["POST"]),
                Route("/v1/messages", self.answer, methods=["POST"]),
                Route("/v1/models", self.models, methods=["GET"]),
            ]
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def last(self) -> Received:
        return self.received[-1]

    async def models(self, request: Request) -> Response:
        self.received.append(Received("GET", request.url.path, dict(request.headers), b""))
        return JSONResponse(
            {"object": "list", "data": [{"id": "gpt-5.2", "object": "model", "created": 0, "owned_by": "test"}]}
        )

    async def answer(self, request: Request) -> Response:
        raw = await request.body()
        path = request.url.path
        self.received.append(Received("POST", path, dict(request.headers), raw))
        how = request.headers.get("x-test-answer", "")
        if how == "429":
            return JSONResponse(_error(path, 429, "rate limited (test)"), 429, headers=RATE_HEADERS)
        if how == "500":
            return JSONResponse(_error(path, 500, "upstream broke (test)"), 500)
        if how == "slow":
            await asyncio.sleep(SLOW_S)
        body = json.loads(raw)
        if body.get("stream"):
            gen = _message_stream(body) if path == "/v1/messages" else _chat_stream(body)
            return StreamingResponse(gen, media_type="text/event-stream")
        if path == "/v1/messages":
            return JSONResponse(_message(body), headers={"request-id": "req_test"})
        if path == "/v1/responses":
            return JSONResponse(_response(body))
        return JSONResponse(_chat(body), headers={"x-request-id": "req_test"})


def big_png() -> bytes:
    """A real picture (1400 x 1100 px of noise, stored uncompressed: 4.6 MB) over the 4 MiB limit of the gateway
    that fetches, and under its pixel limit: refused for its size alone."""
    import io

    import numpy as np
    from PIL import Image

    noise = np.random.default_rng(0).integers(0, 256, (1100, 1400, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(noise).save(buf, "PNG", compress_level=0)
    return buf.getvalue()


class PictureHost(_Loopback):
    """Pictures by URL on a free loopback port: ``/page.png``, ``/big.png`` (:func:`big_png`, its length declared),
    ``/big-stream.png`` (the same in chunks, no length), ``/away`` (a redirect to the same port under the name
    ``localhost``: another host), ``/here`` (a redirect to ``/page.png`` on this host), ``/text`` (no picture),
    ``/slow.png`` (waits 5 s), ``/doc.pdf`` (the bytes set in ``pdf``).  ``hits`` lists the paths asked for."""

    def __init__(self, page: bytes) -> None:
        self.page = page
        self.big = big_png()
        self.pdf = b""
        self.hits: list[str] = []
        super().__init__([Route("/{name:path}", self.serve)])

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    async def serve(self, request: Request) -> Response:
        path = request.url.path
        self.hits.append(path)
        if path == "/big.png":
            return Response(self.big, media_type="image/png")
        if path == "/big-stream.png":

            async def chunks():
                for i in range(0, len(self.big), 2**16):
                    yield self.big[i : i + 2**16]

            return StreamingResponse(chunks(), media_type="image/png")
        if path == "/away":
            return Response(status_code=302, headers={"location": self.url("/away.png", "localhost")})
        if path == "/here":
            return Response(status_code=302, headers={"location": "/page.png"})
        if path == "/doc.pdf":
            return Response(self.pdf, media_type="application/pdf")
        if path == "/text":
            return Response(b"not a picture", media_type="text/plain")
        if path == "/slow.png":
            await asyncio.sleep(SLOW_S)
        return Response(self.page, media_type="image/png")
