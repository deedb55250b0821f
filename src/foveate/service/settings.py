"""Service settings: a frozen dataclass filled from ``FOVEATE_*`` environment variables and CLI flags."""

from __future__ import annotations

import dataclasses
import ipaddress
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError

LOOPBACK_NAMES = ("localhost", "localhost.localdomain")


def default_store_dir() -> Path:
    """``$XDG_CACHE_HOME/foveate/store`` (``~/.cache/foveate/store``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "foveate" / "store"


def _env(name: str) -> dict:
    return {"env": name}


@dataclass(frozen=True)
class ServiceSettings:
    """Everything ``foveate serve`` can be told.  Each field's environment variable is in its metadata.

    Attributes:
        store: the texture store folder (shared with ``foveate encode --store`` and other servers).
        preset: encode preset for uploads (``fast``, ``default``, ``full``).
        host, port: where to listen.  A non-loopback host needs ``api_key`` or ``allow_public``.
        workers: encode workers (threads or processes, see ``pool``).
        pool: ``thread`` or ``process`` (see BENCHMARKS.md, "Encode pool").
        queue: encode jobs that may wait beyond the running ones; more answer 503 with Retry-After.
        max_upload_mb: larger request bodies answer 413.
        max_pixels: larger images answer 422 (checked from the header, before decoding).
        cache_mb: decoded textures kept in memory in front of the store (least recently used dropped first).
        store_max_mb: cap of the store (LRU eviction); ``None`` keeps the store's saved cap, 0 removes it.
        request_timeout: seconds before a request answers 504 (an encode it started still finishes and is stored).
        api_key: when set, every request except ``/healthz`` (and the docs with ``public_docs``) needs
            ``Authorization: Bearer <api_key>``, checked from the headers before any body is read.
        allow_public: without ``api_key``, serve clients at non-loopback addresses too (e.g. behind an
            authenticating proxy).  Without either, a request from a non-loopback client answers 403 -- decided
            per request from the connection's own address, whatever started the app.
        public_docs: ``/docs``, ``/redoc`` and ``/openapi.json`` answer without the key.
        header_timeout: seconds a connection may take to send a complete request head (from its start, or
            from the end of its previous response); then it is closed.
        max_connections: open connections at most; a new one beyond it closes the longest-idle connection
            (no request in flight), or is refused (503) when none is idle.  0: from the open-file limit.
        retry_after: seconds a 503 tells the client to wait.
        torch_threads: torch intra-op threads in the server (default 1: concurrent requests and the encode
            workers are the parallelism; per-request torch thread pools would only oversubscribe the cores).
        weights: relevance weights of every select (``default``: the package's trained weights; ``handset``; or a
            weights file from ``foveate train``).
    """

    store: Path = field(default_factory=default_store_dir, metadata=_env("FOVEATE_STORE"))
    preset: str = field(default="default", metadata=_env("FOVEATE_PRESET"))
    host: str = field(default="127.0.0.1", metadata=_env("FOVEATE_HOST"))
    port: int = field(default=8000, metadata=_env("FOVEATE_PORT"))
    workers: int = field(default=2, metadata=_env("FOVEATE_WORKERS"))
    pool: str = field(default="thread", metadata=_env("FOVEATE_POOL"))
    queue: int = field(default=16, metadata=_env("FOVEATE_QUEUE"))
    max_upload_mb: float = field(default=32.0, metadata=_env("FOVEATE_MAX_UPLOAD_MB"))
    max_pixels: int = field(default=25_000_000, metadata=_env("FOVEATE_MAX_PIXELS"))
    cache_mb: float = field(default=512.0, metadata=_env("FOVEATE_CACHE_MB"))
    store_max_mb: float | None = field(default=None, metadata=_env("FOVEATE_STORE_MAX_MB"))
    request_timeout: float = field(default=60.0, metadata=_env("FOVEATE_TIMEOUT"))
    api_key: str | None = field(default=None, repr=False, metadata=_env("FOVEATE_API_KEY"))
    allow_public: bool = field(default=False, metadata=_env("FOVEATE_ALLOW_PUBLIC"))
    public_docs: bool = field(default=False, metadata=_env("FOVEATE_PUBLIC_DOCS"))
    header_timeout: float = field(default=10.0, metadata=_env("FOVEATE_HEADER_TIMEOUT"))
    max_connections: int = field(default=0, metadata=_env("FOVEATE_MAX_CONNECTIONS"))
    retry_after: int = field(default=2, metadata=_env("FOVEATE_RETRY_AFTER"))
    torch_threads: int = field(default=1, metadata=_env("FOVEATE_TORCH_THREADS"))
    weights: str = field(default="default", metadata=_env("FOVEATE_WEIGHTS"))

    def __post_init__(self) -> None:
        object.__setattr__(self, "store", Path(self.store))
        if self.pool not in ("thread", "process"):
            raise ConfigError(f"pool must be 'thread' or 'process', got {self.pool!r}")
        check_numbers(
            self,
            at_least_one=("workers", "port", "max_pixels", "retry_after", "torch_threads"),
            positive=("max_upload_mb", "request_timeout", "header_timeout"),
            not_negative=("queue", "cache_mb", "max_connections")
            + (("store_max_mb",) if self.store_max_mb is not None else ()),
        )
        if self.api_key is not None and not self.api_key.strip():
            object.__setattr__(self, "api_key", None)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides) -> ServiceSettings:
        """Defaults, replaced by ``FOVEATE_*`` variables, replaced by ``overrides`` (CLI flags; ``None`` = unset)."""
        environ = os.environ if environ is None else environ
        values = {}
        for f in dataclasses.fields(cls):
            raw = environ.get(f.metadata["env"])
            if raw is None or raw == "":
                continue
            values[f.name] = _parse(f, raw)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    @property
    def is_loopback(self) -> bool:
        return is_loopback(self.host)

    @property
    def loopback_only(self) -> bool:
        """Without a key and without ``allow_public``, only loopback clients are served."""
        return self.api_key is None and not self.allow_public

    def check_bind(self) -> None:
        """Refuse a non-loopback address without authentication unless ``allow_public`` (``foveate serve`` fails
        at start; every other way of starting the app still refuses each non-loopback request)."""
        if not self.is_loopback and self.loopback_only:
            raise ConfigError(
                f"refusing to listen on {self.host} without authentication: set FOVEATE_API_KEY (clients then "
                "send 'Authorization: Bearer <key>'), or pass --allow-public if a proxy in front of the server "
                "authenticates"
            )


def check_numbers(
    settings: Any,
    at_least_one: tuple[str, ...] = (),
    positive: tuple[str, ...] = (),
    not_negative: tuple[str, ...] = (),
) -> None:
    """Raise a :class:`ConfigError` naming the first of ``settings``' numeric fields out of its range: counts at
    least 1, sizes and times positive or not negative.  NaN and infinity are out of every range (a NaN passes any
    comparison-based check, then fails as the first request's ``int(nan)``); a ``port`` is at most 65535."""
    for names, low, what in ((at_least_one, 1, "at least 1"), (not_negative, 0, "a number >= 0")):
        for name in names:
            value = getattr(settings, name)
            if not (math.isfinite(value) and value >= low):
                raise ConfigError(f"{name} must be {what}, got {value}")
    for name in positive:
        value = getattr(settings, name)
        if not (math.isfinite(value) and value > 0):
            raise ConfigError(f"{name} must be a positive number, got {value}")
    port = getattr(settings, "port", 1)
    if port > 65535:
        raise ConfigError(f"port must be at most 65535, got {port}")


def is_loopback(host: str) -> bool:
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        addr = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    mapped = getattr(addr, "ipv4_mapped", None)  # ::ffff:127.0.0.1 from a dual-stack socket
    return (mapped or addr).is_loopback


def _parse(f: dataclasses.Field, raw: str):
    name, env = f.name, f.metadata["env"]
    kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
    try:
        if kind.startswith("bool"):
            if raw.lower() in ("1", "true", "yes", "on"):
                return True
            if raw.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(raw)
        if kind.startswith("int"):
            return int(raw)
        if kind.startswith("float"):
            return float(raw)
        return raw
    except ValueError:
        raise ConfigError(f"{env}={raw!r} is not a valid {kind.split(' ')[0]} for {name}") from None
