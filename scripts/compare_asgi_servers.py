"""Which server holds up against idle and slow clients?  The measurement behind BENCHMARKS.md, "Service hardening".

Each candidate serves the same app (``foveate.service:app_from_env``, ``fast`` preset, a fresh store) on a
loopback port, in a subprocess whose open-file limit is 1,024 (a common default).  Per candidate:

1. **half-open**: ``--sockets`` (1,000) connections each send half a request head and stall; after 15 s, how
   many has the server closed, and does a new client get ``/healthz`` (and how fast) while they are open?
2. **idle flood**: 1,100 connections that send nothing (more than the file limit); for 20 s, does ``/healthz``
   answer, and how many bytes of log did the server write?
3. **load**: 20 uploads, then 16 clients x ``--requests`` selects (``foveate bench-serve``'s load): req/s, p99,
   errors.

Candidates: uvicorn as ``foveate serve`` ran it before (h11, no head deadline), uvicorn with
``limit_concurrency``, ``foveate serve`` now (uvicorn + ``foveate.service.server.H11Protocol``), Hypercorn
(``--read-timeout 10``) and Granian (``--http1-header-read-timeout 10000``) where importable (``pip install
hypercorn granian``, or ``--extra-path DIR`` holding them).

    python scripts/compare_asgi_servers.py --json out/servers.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from foveate.bench.service import sample_images, select_load, summarize, upload_all
from foveate.service.process import free_port

NOFILE = 1024


def candidates(port: int) -> dict[str, list[str]]:
    py = sys.executable
    app = "foveate.service:app_from_env"
    uv = [
        py,
        "-m",
        "uvicorn",
        "--factory",
        app,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
        "--h11-max-incomplete-event-size",
        str(64 * 1024),
    ]
    return {
        "uvicorn (before)": uv,
        "uvicorn --limit-concurrency 100": uv + ["--limit-concurrency", "100"],
        "foveate serve (uvicorn + H11Protocol)": [
            py,
            "-m",
            "foveate.cli",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        "hypercorn --read-timeout 10": [
            py,
            "-m",
            "hypercorn",
            f"{app}()",
            "--bind",
            f"127.0.0.1:{port}",
            "--read-timeout",
            "10",
            "--log-level",
            "warning",
        ],
        "granian --http1-header-read-timeout 10000": [
            py,
            "-m",
            "granian",
            "--interface",
            "asgi",
            "--factory",
            app,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
            "--http1-header-read-timeout",
            "10000",
            "--log-level",
            "warning",
        ],
    }


def _limit_files() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))


def start(cmd: list[str], env: dict, log: Path) -> subprocess.Popen:
    with open(log, "wb") as f:
        proc = subprocess.Popen(
            cmd, stdout=f, stderr=subprocess.STDOUT, env=env, preexec_fn=_limit_files, start_new_session=True
        )
    return proc


def wait_up(url: str, proc: subprocess.Popen, timeout: float = 120) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    return False


def open_sockets(port: int, n: int, payload: bytes) -> list[socket.socket]:
    socks = []
    for _ in range(n):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            if payload:
                s.sendall(payload)
            s.setblocking(False)
            socks.append(s)
        except OSError:
            break
    return socks


def closed_count(socks: list[socket.socket]) -> int:
    n = 0
    for s in socks:
        try:
            n += s.recv(4096) == b""
        except BlockingIOError:
            pass
        except OSError:
            n += 1
    return n


def healthz_ms(url: str) -> float | None:
    t0 = time.perf_counter()
    try:
        ok = httpx.get(url + "/healthz", timeout=10).status_code == 200
    except httpx.HTTPError:
        ok = False
    return round((time.perf_counter() - t0) * 1000, 1) if ok else None


def measure(name: str, cmd: list[str], port: int, sockets: int, requests: int) -> dict:
    url = f"http://127.0.0.1:{port}"
    rec: dict = {"server": name}
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("FOVEATE_")}
        env.update(FOVEATE_STORE=str(Path(tmp) / "store"), FOVEATE_PRESET="fast")
        log = Path(tmp) / "server.log"
        proc = start(cmd, env, log)
        try:
            if not wait_up(url, proc):
                rec["error"] = "did not start: " + log.read_text(errors="replace")[-300:]
                return rec
            # 1. half-open heads
            socks = open_sockets(port, sockets, b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            rec["half_open_opened"] = len(socks)
            rec["healthz_ms_with_half_open"] = healthz_ms(url)
            time.sleep(15)
            rec["half_open_closed_after_15s"] = closed_count(socks)
            for s in socks:
                s.close()
            time.sleep(1)
            # 2. idle flood past the file limit
            size0 = log.stat().st_size
            socks = open_sockets(port, 1100, b"")
            rec["idle_opened"] = len(socks)
            answered = [healthz_ms(url) for _ in range(4) if not time.sleep(5)]
            rec["healthz_ms_during_idle_flood"] = answered
            rec["log_bytes_in_20s"] = log.stat().st_size - size0
            for s in socks:
                s.close()
            time.sleep(2)
            # 3. load
            docs = asyncio.run(upload_all(url, sample_images(20, size=512)))
            load = summarize(asyncio.run(select_load(url, docs, 16, requests, seed=1)))
            rec.update({k: load[k] for k in ("requests", "errors", "throughput_rps", "p50_ms", "p99_ms")})
        finally:
            os.killpg(proc.pid, 15)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
    return rec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sockets", type=int, default=1000)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--only", default="", help="comma-separated substrings of candidate names")
    ap.add_argument("--extra-path", default="", help="a folder with hypercorn / granian (pip install --target)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    if args.extra_path:
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), args.extra_path]))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # the client side holds 1,100 sockets
    results = []
    for name, cmd in candidates(free_port()).items():
        if args.only and not any(o in name for o in args.only.split(",")):
            continue
        port = int(cmd[cmd.index("--port") + 1]) if "--port" in cmd else int(cmd[cmd.index("--bind") + 1].split(":")[1])
        rec = measure(name, cmd, port, args.sockets, args.requests)
        print(json.dumps(rec), flush=True)
        results.append(rec)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
