"""Repeated identical log lines, summarised.  Under attack or exhaustion a server logs the same line thousands of
times a second ("socket.accept() out of system resource", "Invalid HTTP request received."); an audit saw 95 MB
of log in 20 s.  :class:`RepeatFilter` lets the first ``burst`` copies of a line through per ``window`` seconds,
drops the rest, and prefixes the next one it lets through with how many it dropped."""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

#: loggers whose records are rate-limited: uvicorn's server log, asyncio (accept errors), foveate's service
LOGGERS = ("uvicorn.error", "asyncio", "foveate.service")


class RepeatFilter(logging.Filter):
    """At most ``burst`` records with the same (logger, level, message, exception) per ``window`` seconds."""

    def __init__(
        self, burst: int = 5, window: float = 60.0, max_keys: int = 1024, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self.burst, self.window, self.max_keys, self.clock = burst, window, max_keys, clock
        self._seen: OrderedDict[tuple, list] = OrderedDict()  # key -> [window start, passed, dropped]
        self._lock = threading.Lock()
        self.dropped = 0

    @staticmethod
    def key(record: logging.LogRecord) -> tuple:
        exc = record.exc_info[1] if record.exc_info else None
        return (record.name, record.levelno, record.getMessage(), type(exc).__name__ if exc else None, str(exc))

    def filter(self, record: logging.LogRecord) -> bool:
        key, now = self.key(record), self.clock()
        with self._lock:
            slot = self._seen.get(key)
            if slot is None or now - slot[0] >= self.window:
                dropped = slot[2] if slot else 0
                self._seen[key] = [now, 1, 0]
                self._seen.move_to_end(key)
                while len(self._seen) > self.max_keys:
                    self._seen.popitem(last=False)
                if dropped:
                    record.msg = f"[{dropped} more of this line in the last {self.window:g} s not logged] {record.msg}"
                return True
            if slot[1] < self.burst:
                slot[1] += 1
                return True
            slot[2] += 1
            self.dropped += 1
            return False


_installed: RepeatFilter | None = None


def rate_limit_logs(burst: int = 5, window: float = 60.0) -> RepeatFilter:
    """Install one :class:`RepeatFilter` on :data:`LOGGERS` (idempotent; returns it)."""
    global _installed
    if _installed is None:
        _installed = RepeatFilter(burst, window)
        for name in LOGGERS:
            logging.getLogger(name).addFilter(_installed)
    return _installed
