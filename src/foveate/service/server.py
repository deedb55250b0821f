"""Running the app on uvicorn, with what uvicorn lacks against idle and slow clients.

uvicorn's own settings are used where it has them: ``timeout_keep_alive`` (an idle connection after a response
is closed after 5 s), ``h11_max_incomplete_event_size`` (a request head arriving in pieces may not pass 64 KiB),
``backlog``.  It has no deadline for a request head -- a connection that sends nothing, or half a head, is held
for ever -- and no cap on open sockets: ``limit_concurrency`` answers 503 beyond N connections but still accepts
and holds every socket, so 1,100 idle sockets exhaust a 1,024-file limit all the same (measured:
BENCHMARKS.md, "Service hardening").  :class:`H11Protocol` is uvicorn's h11 protocol plus both:

* **header timeout** -- a connection must deliver a complete request head within ``header_timeout`` seconds of
  opening (or of its previous response); otherwise it is closed;
* **connection cap** -- at most ``max_connections`` open; a new connection beyond it closes the one idle the
  longest (no request in flight: a half-sent head, or a keep-alive connection between requests), or, when every
  connection has a request in flight, is answered 503 and closed.

``foveate serve`` runs it (:func:`run_server`); with your own uvicorn: ``uvicorn --factory
foveate.service:app_from_env --http foveate.service.server:H11Protocol`` (limits from ``FOVEATE_*``).
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import resource
import socket

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol as _UvicornH11

from ..core.device import tune_allocator
from ..core.errors import ConfigError
from .guard import MAX_REQUEST_HEAD
from .metrics import CLOSED
from .settings import ServiceSettings

log = logging.getLogger("foveate.service")

#: connections closed by the limits, by reason (``/metrics``: foveate_connections_closed_total)
#: file descriptors kept for the store, the encode pool, models and logs when the cap comes from the fd limit
FD_RESERVE = 256

_limits: dict[str, float] = {}


def raise_fd_limit() -> int:
    """Raise this process's soft open-file limit to its hard limit; returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return soft


def auto_max_connections() -> int:
    """The connection cap when none is configured: 1,000, or the open-file limit less :data:`FD_RESERVE`."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 1000
    return max(16, min(1000, soft - FD_RESERVE))


def configure(settings: ServiceSettings) -> dict[str, float]:
    """Set the limits :class:`H11Protocol` applies (``foveate serve``; otherwise read from ``FOVEATE_*``)."""
    _limits.update(
        header_timeout=settings.header_timeout, max_connections=settings.max_connections or auto_max_connections()
    )
    return dict(_limits)


def limits() -> dict[str, float]:
    if not _limits:
        configure(ServiceSettings.from_env())
    return _limits


_FULL = json.dumps(
    {"detail": "the server has too many connections with requests in flight; retry in a few seconds"}
).encode()
_FULL_RESPONSE = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 2\r\n"
    b"connection: close\r\ncontent-length: " + str(len(_FULL)).encode() + b"\r\n\r\n" + _FULL
)


class H11Protocol(_UvicornH11):
    """uvicorn's h11 protocol with a request-head deadline and a cap on open connections."""

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._header_timer: asyncio.TimerHandle | None = None
        self._idle_since = self.loop.time()
        lim = limits()
        if len(self.connections) > lim["max_connections"] and not self._make_room():
            CLOSED["refused_full"] += 1
            log.warning(
                "connection refused: %d connections open, all with a request in flight", len(self.connections) - 1
            )
            transport.write(_FULL_RESPONSE)
            transport.close()
            return
        self._arm_header_timer()

    def connection_lost(self, exc) -> None:
        timer = getattr(self, "_header_timer", None)  # not set before connection_made
        if timer is not None:
            timer.cancel()
            self._header_timer = None
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        self._idle_since = self.loop.time()
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm_header_timer()

    # -- limits ------------------------------------------------------------------------------------------------
    def _waiting_for_head(self) -> bool:
        """No request in flight: the connection has sent nothing, part of a head, or is between requests."""
        return self.conn.their_state is h11.IDLE and (self.cycle is None or self.cycle.response_complete)

    def _arm_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
        self._header_timer = self.loop.call_later(limits()["header_timeout"], self._header_timeout)

    def _header_timeout(self) -> None:
        self._header_timer = None
        if self._waiting_for_head() and not self.transport.is_closing():
            CLOSED["header_timeout"] += 1
            self.transport.close()

    def _make_room(self) -> bool:
        """Close the connection idle the longest (one waiting for a head); False when every one is busy."""
        idle = [
            c
            for c in self.connections
            if c is not self and isinstance(c, H11Protocol) and not c.transport.is_closing() and c._waiting_for_head()
        ]
        if not idle:
            return False
        victim = min(idle, key=lambda c: c._idle_since)
        CLOSED["evicted_idle"] += 1
        victim.transport.close()
        return True


#: errno -> (what it means, what to do), for :func:`check_listen`'s one line
_BIND_ERRORS = {
    errno.EADDRINUSE: ("address already in use", "another process listens there: stop it or pass another --port"),
    errno.EACCES: ("permission denied", "ports below 1024 need privileges: pass a higher --port"),
    errno.EADDRNOTAVAIL: ("address not available", "this machine has no such address: check --host"),
}


def check_listen(host: str, port: int) -> None:
    """Bind every address ``host`` resolves to on ``port`` and let go, as uvicorn will bind them (asyncio's
    ``create_server``: ``SO_REUSEADDR``, IPv6 sockets v6-only), so that ``foveate serve`` on a port in use says so
    in one line before its banner (:class:`ConfigError`) instead of failing inside uvicorn after it."""
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        reason = (getattr(exc, "strerror", None) or str(exc)).lower()
        raise ConfigError(f"cannot listen on {where}: {reason} (check --host)") from None
    for family, kind, proto, _, addr in dict.fromkeys(infos):
        try:
            sock = socket.socket(family, kind, proto)
        except OSError:
            continue  # a family this machine lacks (no IPv6): asyncio skips it too
        try:
            with sock:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind(addr)
        except OSError as exc:
            what, hint = _BIND_ERRORS.get(
                exc.errno or 0, ((exc.strerror or str(exc)).lower(), "check --host and --port")
            )
            raise ConfigError(f"cannot listen on {where}: {what} ({hint})") from None


def check_log_level(level: str) -> None:
    """A :class:`ConfigError` unless ``level`` is one of uvicorn's log levels (checked before the banner)."""
    from uvicorn.config import LOG_LEVELS

    if level.lower() not in LOG_LEVELS:
        raise ConfigError(f"--log-level must be one of {', '.join(LOG_LEVELS)}, got {level!r}")


def run_server(app, settings: ServiceSettings, log_level: str = "info") -> None:
    """Serve ``app`` on ``settings.host:port`` with uvicorn and :class:`H11Protocol` (blocks until stopped)."""
    import uvicorn

    raise_fd_limit()
    tune_allocator()
    configure(settings)
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        log_level=log_level,
        http=H11Protocol,
        timeout_keep_alive=5,
        timeout_graceful_shutdown=5,
        h11_max_incomplete_event_size=MAX_REQUEST_HEAD,
    )
