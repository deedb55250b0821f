"""The upstream: one pooled ``httpx.AsyncClient``; requests forwarded with the client's own headers (credentials
included, never looked at), answers relayed chunk by chunk as they arrive (status, headers and bytes unchanged:
a 429 stays a 429 with its rate-limit headers, server-sent events pass as they are sent)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable

import httpx

#: hop-by-hop headers (RFC 9110 7.6.1) and those the HTTP client sets itself: never forwarded either way
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)
#: connect timeout to the upstream (seconds); reading the answer has the gateway's --upstream-timeout
CONNECT_TIMEOUT = 10.0


class UpstreamTimeout(Exception):
    """The upstream did not answer in time."""


class UpstreamUnreachable(Exception):
    """The upstream could not be reached (refused, unknown host, reset before answering)."""


def forward_headers(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The client's request headers as sent upstream: all but hop-by-hop ones and the gateway's own (``x-foveate*``)."""
    return [(k, v) for k, v in headers if k.lower() not in HOP_BY_HOP and not k.lower().startswith("x-foveate")]


def relay_headers(headers: httpx.Headers) -> list[tuple[str, str]]:
    """The upstream's answer headers as relayed: all but hop-by-hop ones; the length stays (the bytes are relayed
    as sent, compressed or not)."""
    out = [(k, v) for k, v in headers.multi_items() if k.lower() not in HOP_BY_HOP]
    if "content-length" in headers:
        out.append(("content-length", headers["content-length"]))
    return out


class Upstream:
    def __init__(self, base: str, timeout: float) -> None:
        self.base = base.rstrip("/")
        self.client = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout, connect=min(CONNECT_TIMEOUT, timeout)),
            limits=httpx.Limits(max_connections=512, max_keepalive_connections=64),
            follow_redirects=False,
            trust_env=False,  # the upstream named, not a proxy from the environment
        )

    async def aclose(self) -> None:
        await self.client.aclose()

    async def open(
        self, method: str, path: str, query: bytes, headers: list[tuple[str, str]], content: bytes
    ) -> httpx.Response:
        """Send and wait for the answer's head; the body is read by :func:`chunks`."""
        url = self.base + path + (f"?{query.decode('latin-1')}" if query else "")
        request = self.client.build_request(method, url, headers=headers, content=content or None)
        try:
            return await self.client.send(request, stream=True)
        except httpx.TimeoutException:
            raise UpstreamTimeout() from None
        except httpx.TransportError as exc:
            raise UpstreamUnreachable(type(exc).__name__) from None


async def chunks(response: httpx.Response) -> AsyncIterator[bytes]:
    """The answer's bytes as the upstream sends them (undecoded); the upstream connection is released at the end, or
    when the client goes away."""
    try:
        async for chunk in response.aiter_raw():
            yield chunk
    except httpx.HTTPError:
        pass  # the upstream broke off mid-answer: the client sees the answer end there
    finally:
        await response.aclose()
