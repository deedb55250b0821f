"""Calls in forked worker processes that inherit their arguments instead of pickling them (``foveate train``'s
textures are gigabytes; only the results travel back).

Where the OS does not fork, or with one worker, the calls run here, one after another.  Either way the results
come back in call order, and each call runs the same code on one thread, so they are the same.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from .errors import FoveateError

_CALLS: tuple[Callable[..., Any], Sequence[tuple[Any, ...]]] | None = None  # what the forked workers read


def _run(i: int) -> Any:
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != 1:
        # a parent that ran torch on several threads leaves OpenMP's pool behind: a forked child that enters a
        # parallel region waits on threads it does not have, forever.  One thread never enters one.
        torch.set_num_threads(1)
    if _CALLS is None:  # only fork_map's workers run this, after it set the calls
        raise RuntimeError("fork_map: no calls to run")
    fn, calls = _CALLS
    return fn(*calls[i])


def fork_map(fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]], workers: int) -> Iterator[Any]:
    """``fn(*call)`` for each call, in up to ``workers`` forked processes, yielded in call order.  ``fn`` must not
    start a model that is not set up already (a session that the fork copies half-made) or threads of its own."""
    if workers <= 1 or len(calls) < 2 or "fork" not in multiprocessing.get_all_start_methods():
        for call in calls:
            yield fn(*call)
        return
    global _CALLS
    if _CALLS is not None:
        raise RuntimeError("fork_map does not nest")
    _CALLS = (fn, calls)
    old = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # the Rust tokenizer's pool does not survive a fork: say so, quietly
    # concurrent.futures, not multiprocessing.Pool: Pool.terminate (on an error, or when the caller stops early)
    # kills workers that may hold a queue's lock mid-send and then waits on that lock forever; a worker the OS kills
    # hangs a Pool's map for ever too, where here it is a BrokenProcessPool error.  Pending calls are cancelled,
    # running ones finish.
    pool = ProcessPoolExecutor(min(workers, len(calls)), mp_context=multiprocessing.get_context("fork"))
    try:
        futures = [pool.submit(_run, i) for i in range(len(calls))]
        for future in futures:
            yield future.result()
    except BrokenProcessPool:
        raise FoveateError("a worker process died (killed by the OS: out of memory?); run with fewer workers") from None
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        _CALLS = None
        if old is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = old
