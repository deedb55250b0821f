"""A local Ray cluster that foveate started goes away when its driver dies, even by SIGKILL; a cluster it only
joined is left alone (issue 40, item 11).  Ray's own processes outlived a killed driver: its agents
(``ray::DashboardAgent``, ``ray::RuntimeEnvAgent``) by 60-90 s (each waits a minute for the dead GCS to take its
report of the raylet's death), its actors for a few seconds.

What counts: the processes that descend from the driver at the moment it is killed (pid and start time, read from
/proc: a process title Ray sets may overwrite a process's environment, so an inherited variable cannot mark them),
and which of them are still alive after."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time

import pytest

ray = pytest.importorskip("ray")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the watchdog and these counts read /proc"),
]

_DRIVER = """
import sys, time
from foveate.ray.runtime import connect

ray = connect(sys.argv[1] or None, progress=False)

@ray.remote
class Worker:
    def ping(self):
        return 1

w = Worker.remote()
ray.get(w.ping.remote())
print("ready", flush=True)
time.sleep(600)
"""
#: seconds after the kill by which every process of the cluster must be gone (Ray's own took 60-90 s)
GONE_WITHIN = 15.0


def _processes() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, start time) of every live process (zombies are dead)."""
    table = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    data = f.read()
            except OSError:
                continue
            fields = data[data.rindex(b")") + 2 :].split()
            if fields[0] not in (b"Z", b"X"):
                table[int(name)] = (int(fields[1]), int(fields[19]))
    return table


def descendants(root: int) -> dict[int, int]:
    """pid -> start time of every process below ``root`` now."""
    table = _processes()
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in table.items():
        children.setdefault(parent, []).append(pid)
    found, todo = {}, [root]
    while todo:
        for pid in children.get(todo.pop(), []):
            found[pid] = table[pid][1]
            todo.append(pid)
    return found


def alive(snapshot: dict[int, int]) -> list[tuple[int, str]]:
    """(pid, command line) of the processes of ``snapshot`` still running (same pid, same start time)."""
    table = _processes()
    left = []
    for pid, start in snapshot.items():
        if pid in table and table[pid][1] == start:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    left.append((pid, f.read().replace(b"\0", b" ").decode(errors="replace").strip()))
            except OSError:
                continue
    return left


def _start_driver(address: str = "") -> subprocess.Popen:
    env = {**os.environ}
    env.pop("RAY_ADDRESS", None)
    child = subprocess.Popen(
        [sys.executable, "-c", _DRIVER, address], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    ready, _, _ = select.select([child.stdout], [], [], 180)
    line = child.stdout.readline() if ready else ""
    assert line.strip() == "ready", f"the driver did not start (exit {child.poll()})"
    return child


def _kill(snapshot: dict[int, int]) -> None:
    for pid, _ in alive(snapshot):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def test_a_local_cluster_goes_away_when_its_driver_is_killed():
    child = _start_driver()
    snapshot: dict[int, int] = {}
    try:
        deadline = time.time() + 30  # the raylet starts its agents a moment after the cluster is up
        while time.time() < deadline and sum("Agent" in cmd for _, cmd in alive(descendants(child.pid))) < 2:
            time.sleep(0.2)
        time.sleep(1.0)  # a driver killed mid-job: the watchdog has recorded its cluster (every 0.2 s)
        snapshot = descendants(child.pid)
        assert len(snapshot) >= 3, alive(snapshot)  # the GCS, the raylet, the actor, the agents, ...
        child.send_signal(signal.SIGKILL)
        child.wait()
        killed = time.time()
        while alive(snapshot) and time.time() - killed < GONE_WITHIN:
            time.sleep(0.2)
        left = alive(snapshot)
        assert not left, f"{len(left)} of {len(snapshot)} processes outlived the driver by {GONE_WITHIN:g} s: {left}"
    finally:
        child.kill()
        child.wait()
        _kill(snapshot)


def test_a_cluster_it_joined_outlives_the_driver():
    """Killing a driver that connected to a running cluster leaves that cluster and its other work alone."""
    ray.init(num_cpus=1, logging_level="ERROR", log_to_driver=False)
    try:
        address = ray.get_runtime_context().gcs_address

        @ray.remote
        def one() -> int:
            return 1

        child = _start_driver(address)
        snapshot = descendants(child.pid)
        try:
            child.send_signal(signal.SIGKILL)
            child.wait()
            time.sleep(3.0)
            assert ray.get(one.remote(), timeout=60) == 1
            assert ray.cluster_resources().get("CPU") == 1
        finally:
            child.kill()
            child.wait()
            _kill(snapshot)
    finally:
        ray.shutdown()
