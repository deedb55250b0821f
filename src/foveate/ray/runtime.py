"""Ray for the dataset jobs: import it with a clear error when the extra is missing, join or start a cluster,
size the actor pool, and drain a job's per-row summaries into counts (with Ray's progress bars)."""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import ConfigError, FoveateError
from .dataset import EXTRA_HINT

#: failures listed in a summary (the dataset holds all of them, as rows with an error)
MAX_LISTED_FAILURES = 100


def require_ray():
    try:
        import ray.data  # noqa: F401

        import ray
    except ImportError as exc:
        raise FoveateError(f"running on Ray needs Ray Data: {EXTRA_HINT}") from exc
    return ray


def connect(address: str | None = None, progress: bool = True):
    """Use the Ray cluster this process is connected to; else connect to ``address`` (``"auto"``,
    ``"ray://host:10001"``, ``$RAY_ADDRESS`` when ``None``) or start a local one.

    A local cluster started here stops when this process dies, however it dies (:mod:`.watchdog`: Ray's agents
    would outlive a killed driver by a minute or more); a cluster joined is left alone."""
    ray = require_ray()
    if not ray.is_initialized():
        from . import watchdog

        before = watchdog.children(os.getpid()) if watchdog.supported() else {}
        try:
            ray.init(address=address, logging_level="WARNING", log_to_driver=True)
        except (ConnectionError, ValueError, RuntimeError) as exc:
            raise FoveateError(f"cannot connect to Ray at {address or 'a new local cluster'}: {exc}") from exc
        if watchdog.supported():
            started = {
                pid: start
                for pid, start in watchdog.children(os.getpid()).items()
                if before.get(pid) != start and "ray" in watchdog.command_line(pid)
            }
            watchdog.start(started)  # nothing started (a cluster joined): no watchdog
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = progress
    return ray


def check_concurrency(concurrency: int | tuple[int, int] | None) -> None:
    """A worker count :func:`pool` takes: ``None``, a number of workers, or ``(min, max)``; checked before Ray
    starts."""
    if concurrency is None:
        return
    if isinstance(concurrency, int):
        if concurrency < 1:
            raise ConfigError(f"concurrency must be at least 1 worker, got {concurrency}")
        return
    try:
        lo, hi = concurrency
    except (TypeError, ValueError):
        raise ConfigError(f"concurrency is a number of workers or (min, max), got {concurrency!r}") from None
    if not (isinstance(lo, int) and isinstance(hi, int) and 1 <= lo <= hi):
        raise ConfigError(f"concurrency (min, max) needs 1 <= min <= max, got {concurrency}")


def pool(
    ray, concurrency: int | tuple[int, int] | None, cpus: float, batches: int | None = None, upstream: bool = False
):
    """An actor pool of ``concurrency`` workers (``(min, max)`` autoscales), never more than there are
    ``batches`` to do.  ``None``: one per ``cpus`` CPUs of the cluster -- autoscaling from 1 when an ``upstream``
    stage (reading the files of a Ray Dataset) needs CPUs too: a fixed pool holding every CPU would starve it."""
    if concurrency is None:
        n = max(1, int(ray.cluster_resources().get("CPU", 1) // cpus))
        concurrency = (1, n) if upstream and n > 1 else n
    if isinstance(concurrency, int):
        if concurrency < 1:
            raise ConfigError(f"concurrency must be at least 1 worker, got {concurrency}")
        size = min(concurrency, batches) if batches else concurrency
        return ray.data.ActorPoolStrategy(size=size, max_tasks_in_flight_per_actor=2)
    lo, hi = concurrency
    if not 1 <= lo <= hi:
        raise ConfigError(f"concurrency (min, max) needs 1 <= min <= max, got {concurrency}")
    return ray.data.ActorPoolStrategy(min_size=lo, max_size=hi, max_tasks_in_flight_per_actor=2)


def summary_table(columns: dict[str, list]):
    """The per-row summary a worker returns (what :func:`drain` counts); typed, so an all-null column of one
    batch concatenates with the next."""
    import pyarrow as pa

    schema = pa.schema(
        [
            ("key", pa.string()),
            ("id", pa.string()),
            ("status", pa.string()),
            ("error", pa.string()),
            ("ms", pa.float64()),
            ("bytes", pa.int64()),
            ("t0", pa.float64()),
            ("t1", pa.float64()),
            ("pid", pa.int64()),
        ]
    )
    return pa.table({f.name: columns[f.name] for f in schema}, schema=schema)


@dataclass
class JobSummary:
    """What a dataset job did, counted from its per-row summaries: rows by status (``encoded`` / ``selected``,
    ``failed``, ``duplicate``, ``skipped``: done before, ``abandoned``: a newer job took the output over).

    ``seconds`` is the job's wall time on the driver (cluster and worker start included); ``busy_seconds`` runs
    from the first batch a worker started to the last it finished (no start-up, but workers that started late
    count as idle: :meth:`steady_rate` is the rate while all of them worked)."""

    counts: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    busy_seconds: float = 0.0
    output_bytes: int = 0
    work_ms: float = 0.0
    workers: int = 0
    deduplicated: int = 0
    failures: dict[str, str] = field(default_factory=dict)
    #: (start, end, worker pid, rows) of every batch that did work
    batches: list[tuple[float, float, int, int]] = field(default_factory=list, repr=False)

    @property
    def rows(self) -> int:
        return sum(self.counts.values())

    def count(self, status: str) -> int:
        return self.counts.get(status, 0)

    def steady_rate(self) -> tuple[float, float] | None:
        """(rows per second, seconds measured) while every worker was at work: from the moment the last worker
        started its first batch to the moment the first worker finished its last one, each batch counted by its
        share of time inside that window.  ``None`` when the window is empty (too few batches)."""
        by_worker: dict[int, list[tuple[float, float, int, int]]] = {}
        for b in self.batches:
            by_worker.setdefault(b[2], []).append(b)
        if not by_worker:
            return None
        start = max(min(b[0] for b in bs) for bs in by_worker.values())
        end = min(max(b[1] for b in bs) for bs in by_worker.values())
        if end <= start:
            return None
        rows = sum(n * max(0.0, min(t1, end) - max(t0, start)) / (t1 - t0) for t0, t1, _, n in self.batches if t1 > t0)
        return rows / (end - start), end - start

    def to_dict(self) -> dict[str, Any]:
        done = self.rows - self.count("skipped")
        return {
            **{k: self.count(k) for k in sorted(self.counts)},
            "rows": self.rows,
            "seconds": round(self.seconds, 3),
            "busy_seconds": round(self.busy_seconds, 3),
            "per_s": round(done / self.seconds, 3) if self.seconds else None,
            "busy_per_s": round(done / self.busy_seconds, 3) if self.busy_seconds else None,
            "output_bytes": self.output_bytes,
            "work_ms": round(self.work_ms, 1),
            "workers": self.workers,
            "deduplicated": self.deduplicated,
            "failures": dict(self.failures),
        }


def drain(ds, started: float, on_batch: Callable[[JobSummary], None] | None = None) -> JobSummary:
    """Run the job by iterating its summaries (one small row per input row: ``key`` (its source or query id),
    ``status``, ``error``, ``ms``, ``bytes``, ``t0``, ``t1``, ``pid``) and count them."""
    summary = JobSummary()
    first, last = float("inf"), 0.0
    pids: set[int] = set()
    for batch in ds.iter_batches(batch_format="pyarrow", batch_size=None):
        cols = batch.to_pydict()
        for status in cols["status"]:
            summary.counts[status] = summary.counts.get(status, 0) + 1
        for k, status, err in zip(cols["key"], cols["status"], cols["error"]):
            if status == "failed" and len(summary.failures) < MAX_LISTED_FAILURES:
                summary.failures[str(k)] = err
        summary.output_bytes += sum(b or 0 for b in cols["bytes"])
        summary.work_ms += sum(m or 0.0 for m in cols["ms"])
        worked = [
            (a, b, p) for a, b, p, s in zip(cols["t0"], cols["t1"], cols["pid"], cols["status"]) if s != "skipped"
        ]
        if worked:
            first = min(first, min(a for a, _, _ in worked))
            last = max(last, max(b for _, b, _ in worked))
            for key, rows in Counter(worked).items():  # the rows of one batch share (t0, t1, pid)
                summary.batches.append((*key, rows))
        pids.update(p for p in cols["pid"] if p)
        if on_batch is not None:
            on_batch(summary)
    summary.seconds = time.time() - started
    summary.busy_seconds = max(0.0, last - first) if last else 0.0
    summary.workers = len(pids)
    return summary
