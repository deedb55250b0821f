"""Prometheus metrics of one gateway (its own registry): requests, the token figures of the ``x-foveate-*`` headers
summed, cache hits and misses, encodes, passthroughs by reason, the time the gateway adds."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, ProcessCollector, generate_latest

from ..service.metrics import LATENCY_BUCKETS


class GatewayMetrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        ProcessCollector(registry=r)
        self.requests = Counter(
            "foveate_gateway_requests", "Requests by route and status.", ["route", "status"], registry=r
        )
        self.image_tokens = Counter(
            "foveate_gateway_image_tokens",
            "Tokens of the pictures as the upstream model would take them (x-foveate-image-tokens, summed).",
            registry=r,
        )
        self.sent_tokens = Counter(
            "foveate_gateway_sent_tokens",
            "Tokens of the pictures forwarded (x-foveate-sent-tokens, summed).",
            registry=r,
        )
        self.cache = Counter("foveate_gateway_cache", "Pictures found (hit) or encoded (miss).", ["result"], registry=r)
        self.encodes = Counter("foveate_gateway_encodes", "Pictures encoded by this gateway.", registry=r)
        self.passthrough = Counter(
            "foveate_gateway_passthrough", "Requests forwarded unchanged, by reason.", ["reason"], registry=r
        )
        self.added = Histogram(
            "foveate_gateway_added_seconds",
            "Time from the request's arrival to its forwarding upstream (what the gateway adds).",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)
