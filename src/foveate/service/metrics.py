"""Prometheus metrics of one server (its own registry, so several apps in one process do not mix).

Requests, latencies, encodes and rejections are counted as they happen; queue, cache and store figures are
read from the engine when ``/metrics`` is scraped.
"""

from __future__ import annotations

import collections

from prometheus_client import CollectorRegistry, Counter, Histogram, ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

#: connections closed by foveate serve's own limits, by reason (zero under another server: :mod:`.server` counts them)
CLOSED: collections.Counter[str] = collections.Counter()

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class Metrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        ProcessCollector(registry=r)  # process_resident_memory_bytes, cpu seconds, open fds
        self.requests = Counter(
            "foveate_http_requests", "HTTP requests by route and status.", ["method", "route", "status"], registry=r
        )
        self.latency = Histogram(
            "foveate_http_request_duration_seconds",
            "HTTP request latency by route.",
            ["method", "route"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.encodes = Counter("foveate_encodes", "Images encoded and stored by this server.", registry=r)
        self.encode_seconds = Histogram(
            "foveate_encode_duration_seconds",
            "Encode time, including the wait in the queue and the store write.",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.deduplicated = Counter(
            "foveate_uploads_deduplicated",
            "Uploads that waited on an encode of the same image already running instead of encoding it again.",
            registry=r,
        )
        self.rejected = Counter(
            "foveate_rejected", "Requests refused before any work, by reason.", ["reason"], registry=r
        )

    def attach(self, engine) -> None:
        """Report this engine's queue, cache and store figures (one engine at a time)."""
        self.detach()
        self._engine_collector: _EngineCollector | None = _EngineCollector(engine)
        self.registry.register(self._engine_collector)

    def detach(self) -> None:
        collector = getattr(self, "_engine_collector", None)
        if collector is not None:
            self.registry.unregister(collector)
            self._engine_collector = None

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _EngineCollector:
    """Queue, in-memory cache and store figures, read at scrape time."""

    def __init__(self, engine) -> None:
        self.engine = engine

    def describe(self):
        return []  # no duplicate-name check at registration (collect() reads live state)

    def collect(self):
        e = self.engine
        yield _gauge("foveate_encode_queue", "Encode pool jobs running or waiting.", e.pool.pending)
        yield _gauge(
            "foveate_encode_queue_capacity", "Encode pool jobs allowed at once (workers + queue).", e.pool.capacity
        )
        yield _gauge("foveate_encodes_in_progress", "Distinct textures being encoded now.", e.encodes_in_progress)
        yield _counter("foveate_texture_cache_hits", "Texture lookups answered from memory.", e.cache.hits)
        yield _counter("foveate_texture_cache_misses", "Texture lookups that went to the store.", e.cache.misses)
        yield _gauge("foveate_texture_cache_entries", "Decoded textures in memory.", len(e.cache))
        yield _gauge("foveate_texture_cache_bytes", "Bytes of decoded textures in memory.", e.cache.bytes)
        events = CounterMetricFamily(
            "foveate_store_events",
            "Store events in this server process: hits, misses, puts, duplicates, evictions, corrupt entries dropped.",
            labels=["event"],
        )
        for k, v in e.store.counters.to_dict().items():
            events.add_metric([k], v)
        yield events
        closed = CounterMetricFamily(
            "foveate_connections_closed",
            "Connections closed by the server's limits: header_timeout, evicted_idle (cap reached), refused_full.",
            labels=["reason"],
        )
        for reason in ("header_timeout", "evicted_idle", "refused_full"):
            closed.add_metric([reason], CLOSED[reason])
        yield closed
        stats = e.store.stats()
        yield _gauge("foveate_store_entries", "Textures in the store (all processes).", stats["entries"])
        yield _gauge("foveate_store_bytes", "Bytes of textures in the store (all processes).", stats["bytes"])


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def _counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, value=value)
