"""Stop a local Ray cluster when the process that started it dies, even by SIGKILL.

``ray.init()`` without an address starts the cluster's processes (GCS, raylet, dashboard, monitors) as children of
the driver.  The kernel kills the GCS and the raylet with the driver (Ray asks for that: ``PR_SET_PDEATHSIG``), but
not what the raylet started: its workers and actors notice within seconds, its agents (``ray::DashboardAgent``,
``ray::RuntimeEnvAgent``) only after 60-90 s -- each waits a minute for the dead GCS to take its report of the
raylet's death.

:func:`start` runs this file as a small process of its own session (a signal to the driver's process group does not
reach it), handing it the Ray processes the driver started and the read end of a pipe whose write end only the
driver holds.  The watchdog records, five times a second, every process below those (with its start time, so a
reused pid is never taken for one of them); when the pipe reads end-of-file (the driver exited or was killed), or
the driver's pid is gone (a fork of the driver may hold the pipe open), it sends what is left SIGTERM, then SIGKILL
a second later, and exits.  Linux only (it reads ``/proc``); elsewhere :func:`start` does nothing.

This file imports only the standard library: it runs as a script (``python -I watchdog.py``), without foveate.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time

#: seconds between two records of the cluster's processes: a process started less than this before the driver dies,
#: under a parent that dies with it, is not seen (Ray's workers end by themselves within seconds)
POLL_S = 0.2
#: seconds the cluster's processes get to exit on SIGTERM before SIGKILL
GRACE_S = 1.0

_running: list[tuple[subprocess.Popen, int]] = []  # (watchdog, write end of its pipe) of this process


def supported() -> bool:
    return sys.platform.startswith("linux") and os.path.isdir("/proc/self")


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time in clock ticks) of a live process; ``None`` when it is gone (a zombie is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rindex(b")") + 2 :].split()  # the command name may hold spaces and parentheses
    return None if fields[0] in (b"Z", b"X") else (int(fields[1]), int(fields[19]))


def _pids() -> set[int]:
    return {int(n) for n in os.listdir("/proc") if n.isdigit()}


def children(pid: int) -> dict[int, int]:
    """pid -> start time of the children of ``pid``."""
    found = {}
    for p in _pids():
        st = _stat(p)
        if st is not None and st[0] == pid:
            found[p] = st[1]
    return found


def command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


class Recorder:
    """The processes of a cluster: ``known`` (pid -> start time) and every process started below them since.  An
    update reads ``/proc/PID/stat`` of the new pids and of the known ones only (a busy node holds thousands)."""

    def __init__(self, known: dict[int, int]) -> None:
        self.known = dict(known)
        self.seen: dict[int, tuple[int, int]] = {}  # pid -> (parent, start) of every live process read so far

    def update(self) -> dict[int, int]:
        pids = _pids()
        for pid in self.seen.keys() - pids:
            del self.seen[pid]
        for pid in pids - self.seen.keys():
            st = _stat(pid)
            if st is not None:
                self.seen[pid] = st
        for pid, start in list(self.known.items()):  # read again: the start time tells a reused pid apart
            st = _stat(pid)
            if st is None or st[1] != start:
                del self.known[pid]
                self.seen.pop(pid, None)
        below: dict[int, list[int]] = {}
        for pid, (parent, _) in self.seen.items():
            below.setdefault(parent, []).append(pid)
        todo = list(self.known)
        while todo:
            for pid in below.get(todo.pop(), []):
                if pid not in self.known:
                    self.known[pid] = self.seen[pid][1]
                    todo.append(pid)
        return self.known


def stop(recorder: Recorder) -> int:
    """SIGTERM what is left of the recorded processes, SIGKILL what outlives :data:`GRACE_S`.  Returns how many
    processes were signalled."""
    signalled: set[int] = set()
    for sig, wait in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, 1.0), (signal.SIGKILL, 1.0)):
        if not recorder.update():
            break
        for pid in recorder.known:
            try:
                os.kill(pid, sig)
                signalled.add(pid)
            except OSError:
                pass
        deadline = time.monotonic() + wait
        while recorder.update() and time.monotonic() < deadline:
            time.sleep(0.05)
    return len(signalled)


def watch(fd: int, driver: tuple[int, int], known: dict[int, int]) -> int:
    """Record the processes below ``known`` until the pipe ``fd`` closes or the ``driver`` (pid, start time) is
    gone; then :func:`stop` them."""
    recorder = Recorder(known)
    while True:
        recorder.update()
        ready, _, _ = select.select([fd], [], [], POLL_S)
        if ready and not os.read(fd, 4096):
            break  # end of file: the driver is gone
        st = _stat(driver[0])
        if st is None or st[1] != driver[1]:
            break
    return stop(recorder)


def start(roots: dict[int, int]) -> bool:
    """Start a watchdog for the processes ``roots`` (pid -> start time: what this process started for a local
    cluster).  Returns whether one runs.  A watchdog started before by this process (for a cluster shut down since)
    is told to finish now."""
    if not roots or not supported():
        return False
    for proc, fd in _running:
        os.close(fd)
        proc.poll()
    _running.clear()
    me = os.getpid()
    start_time = (_stat(me) or (0, 0))[1]
    read_end, write_end = os.pipe()  # neither end is inherited by a process started later (close-on-exec)
    try:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-I",
                os.path.abspath(__file__),
                str(read_end),
                f"{me}:{start_time}",
                *(f"{p}:{s}" for p, s in roots.items()),
            ],
            pass_fds=(read_end,),
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    except OSError:
        os.close(write_end)
        return False
    finally:
        os.close(read_end)
    _running.append((proc, write_end))
    return True


def main(argv: list[str]) -> int:
    fd = int(argv[0])
    pid, start_time = (int(x) for x in argv[1].split(":"))
    known = {int(p): int(s) for p, s in (a.split(":") for a in argv[2:])}
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C in the driver's terminal is the driver's to handle
    watch(fd, (pid, start_time), known)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
