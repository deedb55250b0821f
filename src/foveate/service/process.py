"""Run ``foveate serve`` as a real subprocess on a free loopback port (tests and ``foveate bench-serve``).

with ServerProcess(store=tmp / "store", preset="fast") as srv:
    httpx.get(srv.url + "/healthz")
    srv.rss_bytes()                      # the server's resident memory
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def free_port() -> int:
    """A loopback port free now (another process may take it before it is bound: :class:`ServerProcess` retries)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def holds_port(pid: int, port: int) -> bool | None:
    """Whether process ``pid`` listens on TCP ``port`` (Linux: its socket inodes in ``/proc/<pid>/fd`` against the
    listening sockets of ``/proc/net/tcp``); ``None`` where that cannot be told (no ``/proc``)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
        table = Path("/proc/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return None
    inodes = set()
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue  # closed meanwhile
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    for row in table:
        f = row.split()
        if len(f) > 9 and f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port and f[9] in inodes:
            return True
    return False


#: how often :meth:`ServerProcess.start` tries another port when the one it drew was taken before the server bound it
PORT_TRIES = 5


def _vm_rss(pid: int) -> int | None:
    """``VmRSS`` of a process in bytes from ``/proc/<pid>/status`` (None: no such line, e.g. a zombie).  Raises
    ``OSError`` where the file cannot be read (no such process, not Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return None


class _PortTaken(Exception):
    """The drawn port was bound by another process first."""


class ServerProcess:
    """``foveate serve`` in a subprocess; started on ``__enter__`` (waits for ``/healthz``), always stopped on
    ``__exit__``.  ``args`` are extra CLI flags; ``env`` extra environment variables; ``nofile`` an open-file
    limit (soft and hard) for the server process; ``command`` the server command (``serve`` or ``gateway``)."""

    def __init__(
        self,
        store: str | os.PathLike,
        preset: str | None = "fast",
        args: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
        startup_timeout: float = 120.0,
        nofile: int | None = None,
        command: str = "serve",
    ) -> None:
        self.command = command
        self.store = Path(store)
        self.preset = preset
        self.args = tuple(args)
        self.env = dict(env or {})
        self.startup_timeout = startup_timeout
        self.nofile = nofile
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self.log_path = Path(tempfile.mkstemp(prefix="foveate-serve-", suffix=".log")[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ServerProcess:
        """Start the server on a free loopback port and wait until it answers ``/healthz`` -- itself, not another
        process that took the port meanwhile (:func:`holds_port`); a port taken first: another one."""
        for _ in range(PORT_TRIES):
            try:
                return self._start_once()
            except _PortTaken:
                continue
        raise RuntimeError(f"foveate {self.command}: {PORT_TRIES} free ports were taken first:\n{self.log()}")

    def _start_once(self) -> ServerProcess:
        import httpx

        self.port = free_port()
        cmd = [
            sys.executable,
            "-m",
            "foveate.cli",
            self.command,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--store",
            str(self.store),
            "--log-level",
            "warning",
            *self.args,
        ]
        if self.preset is not None:
            cmd += ["--preset", self.preset]
        # the server's settings come from args and env only; foveate's own cache (FOVEATE_CACHE) is not a setting
        env = {k: v for k, v in os.environ.items() if not k.startswith("FOVEATE_") or k == "FOVEATE_CACHE"}
        env.update(self.env)
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                preexec_fn=None if self.nofile is None else self._limit_files,
            )
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                if "address already in use" in self.log():
                    raise _PortTaken
                raise RuntimeError(f"foveate {self.command} exited with code {self.proc.returncode}:\n{self.log()}")
            try:
                ok = httpx.get(self.url + "/healthz", timeout=2.0).status_code == 200
            except httpx.HTTPError:
                ok = False
            if ok and holds_port(self.proc.pid, self.port) is not False:
                return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(
            f"foveate {self.command} did not answer /healthz within {self.startup_timeout:g} s:\n{self.log()}"
        )

    def _limit_files(self) -> None:
        import resource

        assert self.nofile is not None  # the preexec_fn only of a server with a limit
        resource.setrlimit(resource.RLIMIT_NOFILE, (self.nofile, self.nofile))

    def log_bytes(self) -> int:
        """Bytes the server has written to its log so far."""
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL: no shutdown handlers, no flushing -- a crash."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)  # its process group: encode workers die with it
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.kill()

    def rss_bytes(self) -> int | None:
        """Resident memory of the server process (Linux /proc), or None where unavailable."""
        if self.proc is None:
            return None
        try:
            return _vm_rss(self.proc.pid)
        except (OSError, AttributeError):
            return None

    def cpu_seconds(self) -> float | None:
        """CPU time (user + system) the server process has used so far (Linux /proc), or None."""
        if self.proc is None:
            return None
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, AttributeError, IndexError, ValueError):
            return None

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
        self.log_path.unlink(missing_ok=True)
