"""Pictures given by ``http(s)://`` URL, fetched only from the hosts the operator listed (``--fetch-hosts``).

The rules, in the order they are checked (any refusal: the picture is not fetched):

* the URL's host, lower-cased, must be **exactly** one of the listed names (no suffix match, no wildcard); a URL with
  user info (``https://a.com@b.com/``), a backslash, a space or a control character is refused, and the request is
  sent to the address checked, not to a re-parsed URL;
* ``https`` only; ``http`` only to a listed loopback address (``127.0.0.1``, ``::1``: a local picture server);
* the name is resolved once and the connection goes to that address (no second lookup that could answer otherwise;
  TLS still checks the certificate for the name).  Every address it resolves to must be public: a loopback, private,
  link-local or otherwise reserved address is refused unless the host was listed as that address itself
  (``--fetch-hosts 10.0.0.5``);
* a redirect is followed only to the same host and scheme (at most :data:`MAX_REDIRECTS`); to any other host it is
  refused;
* the body is read up to the gateway's body limit (``--max-body-mb``) and no further; the whole fetch has
  ``--fetch-timeout`` seconds.

A refused or failed fetch raises :class:`FetchFailed`; the gateway then forwards the request unchanged.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import httpx

MAX_REDIRECTS = 3
#: characters that no URL the gateway fetches may hold (parsers disagree about them)
BAD_CHARS = frozenset("\\ \t\r\n") | frozenset(chr(c) for c in range(32))

IP = ipaddress.IPv4Address | ipaddress.IPv6Address


class FetchFailed(Exception):
    """A picture URL that was refused or could not be fetched (the message says which rule or what failed)."""


@dataclass(frozen=True)
class Target:
    """A checked URL: its scheme, host (as listed), port and path with query."""

    scheme: str
    host: str
    port: int
    path: str


def _literal(host: str) -> IP | None:
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return None
    return _unmapped(ip)


def _unmapped(ip: IP) -> IP:
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def check_url(url: str, hosts: frozenset[str]) -> Target:
    """The URL's parts when it may be fetched under the host list ``hosts`` (before any lookup), else
    :class:`FetchFailed`."""
    if any(c in BAD_CHARS for c in url):
        raise FetchFailed("the URL holds a space, backslash or control character")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise FetchFailed("the URL cannot be parsed") from None
    if parts.scheme not in ("http", "https"):
        raise FetchFailed(f"scheme {parts.scheme!r} is not fetched")
    if "@" in parts.netloc:
        raise FetchFailed("a URL with user info is not fetched")
    host = (parts.hostname or "").lower()
    if not host or host not in hosts:
        raise FetchFailed(f"host {host!r} is not in --fetch-hosts")
    literal = _literal(host)
    if parts.scheme == "http" and (literal is None or not literal.is_loopback):
        raise FetchFailed("only https is fetched (http only from a listed loopback address)")
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return Target(parts.scheme, host, port or (443 if parts.scheme == "https" else 80), path)


async def resolve(target: Target) -> IP:
    """The address to connect to: the listed literal itself, or the name's first address when every address it
    resolves to is public."""
    literal = _literal(target.host)
    if literal is not None:
        return literal
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise FetchFailed(f"{target.host} could not be resolved ({exc.strerror or exc})") from None
    addresses = [_unmapped(ipaddress.ip_address(info[4][0])) for info in infos]
    if not addresses:
        raise FetchFailed(f"{target.host} has no address")
    for ip in addresses:
        if not ip.is_global:
            raise FetchFailed(
                f"{target.host} resolves to the non-public address {ip}; list the address itself to allow it"
            )
    return addresses[0]


class Fetcher:
    """Fetches picture URLs under the rules above with one pooled client (no proxy from the environment)."""

    def __init__(self, hosts: tuple[str, ...], max_bytes: int, timeout: float) -> None:
        self.hosts = frozenset(h.lower() for h in hosts)
        self.max_bytes = max_bytes
        self.timeout = timeout
        self.client = httpx.AsyncClient(timeout=httpx.Timeout(timeout), follow_redirects=False, trust_env=False)

    async def aclose(self) -> None:
        await self.client.aclose()

    def listed(self, url: str) -> bool:
        """Whether the URL names a listed host (a URL that does not is never contacted and its picture passes as it
        is; one that does is fetched under every other rule, or its request passes with ``fetch-failed``)."""
        try:
            return (urlsplit(url).hostname or "").lower() in self.hosts
        except ValueError:
            return False

    async def fetch(self, url: str) -> tuple[bytes, str]:
        """(bytes, media type) of the picture at ``url``; :class:`FetchFailed` for a refusal or a failure."""
        try:
            return await asyncio.wait_for(self._fetch(url), self.timeout)
        except TimeoutError:
            raise FetchFailed(f"no complete answer within {self.timeout:g} s") from None

    async def _fetch(self, url: str) -> tuple[bytes, str]:
        target = check_url(url, self.hosts)
        for _ in range(MAX_REDIRECTS + 1):
            ip = await resolve(target)
            where = f"[{ip}]" if ip.version == 6 else str(ip)
            default = (target.scheme == "https" and target.port == 443) or (
                target.scheme == "http" and target.port == 80
            )
            name = f"[{target.host}]" if ":" in target.host else target.host  # an IPv6 literal
            host_header = name if default else f"{name}:{target.port}"
            request = self.client.build_request(
                "GET",
                f"{target.scheme}://{where}:{target.port}{target.path}",
                headers={"host": host_header, "accept": "image/*, application/pdf"},
                extensions={"sni_hostname": target.host} if target.scheme == "https" else {},
            )
            try:
                response = await self.client.send(request, stream=True)
            except httpx.HTTPError as exc:
                raise FetchFailed(f"{target.host} could not be reached ({type(exc).__name__})") from None
            try:
                if response.is_redirect:
                    location = response.headers.get("location", "")
                    here = f"{target.scheme}://{host_header}{target.path}"
                    nxt = check_url(urljoin(here, location), self.hosts)
                    if (nxt.scheme, nxt.host, nxt.port) != (target.scheme, target.host, target.port):
                        raise FetchFailed("a redirect to another host or scheme is not followed")
                    target = nxt
                    continue
                if response.status_code != 200:
                    raise FetchFailed(f"{target.host} answered {response.status_code}")
                return await self._body(response), response.headers.get("content-type", "").split(";")[0].strip()
            finally:
                await response.aclose()
        raise FetchFailed(f"more than {MAX_REDIRECTS} redirects")

    async def _body(self, response: httpx.Response) -> bytes:
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            raise FetchFailed(f"the picture is over the limit of {self.max_bytes} bytes")
        parts: list[bytes] = []
        size = 0
        try:
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > self.max_bytes:
                    raise FetchFailed(f"the picture is over the limit of {self.max_bytes} bytes")
                parts.append(chunk)
        except httpx.HTTPError as exc:
            raise FetchFailed(f"the picture's transfer broke off ({type(exc).__name__})") from None
        return b"".join(parts)
