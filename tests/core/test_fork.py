"""``fork_map``: calls in forked workers that inherit their arguments, results in call order, the same as one
process's."""

from __future__ import annotations

import multiprocessing
import os

import numpy as np
import pytest

from foveate.core.fork import fork_map

forks = pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="the OS does not fork")
BIG = np.arange(2_000_000, dtype=np.float64)  # inherited by the workers, never pickled to them


def _work(i: int, arr: np.ndarray) -> tuple[int, float, int]:
    rng = np.random.default_rng(i)
    return i, float((arr[i::7] * rng.random()).sum()), os.getpid()


@forks
def test_results_in_call_order_equal_to_one_process():
    calls = [(i, BIG) for i in range(9)]
    here = list(fork_map(_work, calls, workers=1))
    forked = list(fork_map(_work, calls, workers=2))
    assert [r[:2] for r in forked] == [r[:2] for r in here]
    assert [r[0] for r in forked] == list(range(9))
    assert {r[2] for r in here} == {os.getpid()}
    assert os.getpid() not in {r[2] for r in forked}  # it did fork


def test_one_worker_or_one_call_runs_here():
    assert [r[2] for r in fork_map(_work, [(0, BIG)], workers=4)] == [os.getpid()]
    assert list(fork_map(_work, [], workers=2)) == []


def _nested(i: int) -> list:
    return list(fork_map(_work, [(i, BIG), (i + 1, BIG)], workers=2))


def _fails(i: int) -> int:
    if i == 3:
        raise ValueError("call 3 fails")
    return i


@forks
def test_a_failing_call_raises_here_and_the_map_can_run_again():
    with pytest.raises(ValueError, match="call 3 fails"):
        list(fork_map(_fails, [(i,) for i in range(6)], workers=2))
    assert list(fork_map(_fails, [(i,) for i in range(3)], workers=2)) == [0, 1, 2]


@forks
def test_nesting_is_refused():
    with pytest.raises(RuntimeError, match="nest"):
        list(fork_map(_nested, [(0,), (1,)], workers=2))


def test_workers_are_decided_in_one_place(monkeypatch):
    from foveate.core import device
    from foveate.core.errors import DeviceError

    monkeypatch.setenv("FOVEATE_TRAIN_WORKERS", "3")
    assert device.train_workers() == 3
    monkeypatch.setenv("FOVEATE_TRAIN_WORKERS", "two")
    with pytest.raises(DeviceError, match="FOVEATE_TRAIN_WORKERS"):
        device.train_workers()
    monkeypatch.delenv("FOVEATE_TRAIN_WORKERS")
    assert device.train_workers() == device.cpu_cores() >= 1


_AFTER_TORCH = """
import torch
from foveate.core.fork import fork_map

torch.set_num_threads(2)
x = torch.randn(512, 512)
for _ in range(20):
    x = torch.tanh(x @ x / 512)  # the parent's OpenMP pool is up

def child(i):
    y = torch.randn(512, 512)
    return float((y @ y).sum() * 0) + i  # a parallel region, if the child had several threads

assert list(fork_map(child, [(i,) for i in range(6)], 2)) == list(range(6))
assert torch.get_num_threads() == 2  # the parent's own setting is left alone
print("ok")
"""


@forks
def test_workers_after_the_parent_ran_torch_on_threads_do_not_hang():
    """A parent that ran torch on several threads and then forks: the children run on one thread (GNU OpenMP's pool
    does not survive a fork; a child entering a parallel region would wait forever).  In a subprocess with a
    timeout, so a regression fails instead of hanging the suite."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _AFTER_TORCH], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def _killed(i: int) -> int:
    if i == 1:
        os.kill(os.getpid(), 9)  # as the OOM killer does
    return i


@forks
def test_a_killed_worker_is_an_error_not_a_hang():
    """multiprocessing.Pool waited for ever on a worker the OS killed (and could deadlock in terminate on an
    error); the map raises and the next one runs."""
    from foveate.core.errors import FoveateError

    with pytest.raises(FoveateError, match="worker process died"):
        list(fork_map(_killed, [(i,) for i in range(4)], workers=2))
    assert list(fork_map(_fails, [(i,) for i in range(3)], workers=2)) == [0, 1, 2]


@forks
def test_stopping_early_is_clean():
    it = fork_map(_fails, [(i,) for i in range(3)], workers=2)
    assert next(it) == 0
    it.close()  # the caller stops: pending calls are cancelled, the map can run again
    assert list(fork_map(_fails, [(i,) for i in range(3)], workers=2)) == [0, 1, 2]
