"""Gateway settings: a frozen dataclass filled from ``FOVEATE_*`` environment variables and CLI flags (the same
variables as ``foveate serve`` where the meaning is the same: store, preset, API key, public access)."""

from __future__ import annotations

import dataclasses
import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..core.config import DEFAULT_BUDGET
from ..core.errors import ConfigError
from ..service.settings import ServiceSettings, _parse, check_numbers, default_store_dir, is_loopback

#: the header that carries the gateway's own key (``Authorization`` belongs to the upstream)
KEY_HEADER = "x-foveate-key"


def _env(name: str) -> dict:
    return {"env": name}


def _budget(value: int | str) -> int | str:
    """A budget of at least 1 token, or ``"auto"``."""
    if isinstance(value, str):
        text = value.strip().lower()
        if text == "auto":
            return "auto"
        if not text.lstrip("-").isdigit():
            raise ConfigError(f"budget must be a number of tokens or 'auto', got {value!r} (FOVEATE_BUDGET, --budget)")
        value = int(text)
    if isinstance(value, bool) or value < 1:
        raise ConfigError(f"budget must be at least 1, got {value}")
    return value


def _is_ipv6(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).version == 6
    except ValueError:
        return False


@dataclass(frozen=True)
class GatewaySettings:
    """Everything ``foveate gateway`` can be told.  Each field's environment variable is in its metadata.

    Attributes:
        upstream: the provider's base URL (``https://api.openai.com``, ``https://api.anthropic.com``, a vLLM server);
            ``POST /v1/chat/completions`` is forwarded to ``upstream + /v1/chat/completions`` (a trailing ``/v1``
            on ``upstream`` is dropped, so both spellings work).
        host, port: where to listen.  A non-loopback host needs ``api_key`` or ``allow_public``.
        store: the texture store folder (shared with ``foveate serve`` and ``foveate encode --store``).
        preset: encode preset of the pictures (``fast``, ``default``, ``full``).
        budget: tokens selected per picture before planning under the model's rule, or ``"auto"``: chosen per
            picture and question (:mod:`foveate.gateway.budget`).
        workers: encode threads.
        max_body_mb: larger request bodies answer 413 in the provider's error shape.
        max_pixels: a larger picture answers 400 (checked from its header, before decoding).
        cache_mb: decoded textures kept in memory in front of the store.
        upstream_timeout: seconds to wait for the upstream's answer to start; then 504.
        api_key: when set, every request but ``/healthz`` needs ``x-foveate-key: <api_key>`` (the client's
            ``Authorization`` goes to the upstream untouched).
        allow_public: without ``api_key``, serve clients at non-loopback addresses too.
        log_requests: one JSON line per request on stderr (model, tokens, timings; no content, no keys).
        torch_threads: torch threads per encode.
        fetch_hosts: host names (exact) from which pictures given by ``http(s)://`` URL are fetched and re-planned
            (:mod:`foveate.gateway.fetch` says under which rules); empty: no picture is ever fetched.
        fetch_timeout: seconds a picture's fetch may take; then the request is forwarded unchanged.
        replan_history: re-plan the pictures of earlier user turns too, for the latest turn's question (default:
            they are forwarded as the client sent them).
    """

    upstream: str = field(default="", metadata=_env("FOVEATE_UPSTREAM"))
    host: str = field(default="127.0.0.1", metadata=_env("FOVEATE_HOST"))
    port: int = field(default=8000, metadata=_env("FOVEATE_PORT"))
    store: Path = field(default_factory=default_store_dir, metadata=_env("FOVEATE_STORE"))
    preset: str = field(default="default", metadata=_env("FOVEATE_PRESET"))
    budget: int | str = field(default=DEFAULT_BUDGET, metadata=_env("FOVEATE_BUDGET"))
    workers: int = field(default=2, metadata=_env("FOVEATE_WORKERS"))
    max_body_mb: float = field(default=32.0, metadata=_env("FOVEATE_MAX_BODY_MB"))
    max_pixels: int = field(default=25_000_000, metadata=_env("FOVEATE_MAX_PIXELS"))
    cache_mb: float = field(default=512.0, metadata=_env("FOVEATE_CACHE_MB"))
    upstream_timeout: float = field(default=600.0, metadata=_env("FOVEATE_UPSTREAM_TIMEOUT"))
    api_key: str | None = field(default=None, repr=False, metadata=_env("FOVEATE_API_KEY"))
    allow_public: bool = field(default=False, metadata=_env("FOVEATE_ALLOW_PUBLIC"))
    log_requests: bool = field(default=False, metadata=_env("FOVEATE_LOG_REQUESTS"))
    torch_threads: int = field(default=1, metadata=_env("FOVEATE_TORCH_THREADS"))
    replan_history: bool = field(default=False, metadata=_env("FOVEATE_REPLAN_HISTORY"))
    fetch_hosts: tuple[str, ...] = field(default=(), metadata=_env("FOVEATE_FETCH_HOSTS"))
    fetch_timeout: float = field(default=10.0, metadata=_env("FOVEATE_FETCH_TIMEOUT"))

    def __post_init__(self) -> None:
        object.__setattr__(self, "store", Path(self.store))
        up = str(self.upstream).strip().rstrip("/")
        if up.endswith("/v1"):
            up = up[: -len("/v1")]
        parts = urlsplit(up)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(
                f"--upstream must be an http(s) URL such as https://api.openai.com, got {self.upstream!r}"
            )
        object.__setattr__(self, "upstream", up)
        object.__setattr__(self, "budget", _budget(self.budget))
        check_numbers(
            self,
            at_least_one=("port", "workers", "max_pixels", "torch_threads"),
            positive=("max_body_mb", "upstream_timeout", "fetch_timeout"),
            not_negative=("cache_mb",),
        )
        hosts = self.fetch_hosts.split(",") if isinstance(self.fetch_hosts, str) else self.fetch_hosts
        hosts = tuple(h.strip().lower().strip("[]") for h in hosts if h.strip())
        for h in hosts:
            if any(c in h for c in "/:@ *") and not _is_ipv6(h):
                raise ConfigError(f"--fetch-hosts takes exact host names such as images.example.com, got {h!r}")
        object.__setattr__(self, "fetch_hosts", hosts)
        if self.api_key is not None and not self.api_key.strip():
            object.__setattr__(self, "api_key", None)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides) -> GatewaySettings:
        """Defaults, replaced by ``FOVEATE_*`` variables, replaced by ``overrides`` (CLI flags; ``None`` = unset)."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            raw = environ.get(f.metadata["env"])
            if raw is None or raw == "":
                continue
            values[f.name] = raw if f.name == "budget" else _parse(f, raw)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    @property
    def max_body(self) -> int:
        return int(self.max_body_mb * 2**20)

    def check_bind(self) -> None:
        """Refuse a non-loopback address without authentication unless ``allow_public`` (as ``foveate serve``)."""
        if not is_loopback(self.host) and self.api_key is None and not self.allow_public:
            raise ConfigError(
                f"refusing to listen on {self.host} without authentication: set FOVEATE_API_KEY (clients then "
                f"send '{KEY_HEADER}: <key>'), or pass --allow-public if a proxy in front of the gateway authenticates"
            )

    def server_settings(self) -> ServiceSettings:
        """The uvicorn side (host, port, header timeout, connection cap) as ``foveate serve`` runs it."""
        return ServiceSettings(
            store=self.store, host=self.host, port=self.port, api_key=self.api_key, allow_public=self.allow_public
        )
