"""Query-embedding latency with one vs two torch threads, on an idle CPU and with busy neighbours.

    python scripts/embed_threads.py [--busy 2] [-n 30]

Starts ``--busy`` processes that spin on a core, then times ``n`` MiniLM embeddings of distinct questions with
``torch.set_num_threads(k)`` for k = 1, 2 (bypassing ``foveate.core.device.request_threads``).  Backs the figures in
BENCHMARKS.md ("The question is embedded on one torch thread").
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import time

import torch


def _spin(stop) -> None:
    while not stop.is_set():
        pass


def _time_embeddings(n: int) -> list[float]:
    from foveate.query.text import embed_texts

    embed_texts(["warm up"])
    ts = []
    for i in range(n):
        t0 = time.perf_counter()
        embed_texts([f"what is the date of the letter number {i}"])
        ts.append((time.perf_counter() - t0) * 1000.0)
    return ts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--busy", type=int, default=2, help="busy-looping processes in the second round")
    ap.add_argument("-n", type=int, default=30, help="embeddings per measurement")
    args = ap.parse_args()
    for busy in (0, args.busy):
        stop = multiprocessing.Event()
        procs = [multiprocessing.Process(target=_spin, args=(stop,), daemon=True) for _ in range(busy)]
        for p in procs:
            p.start()
        time.sleep(0.5)
        try:
            for threads in (1, 2):
                torch.set_num_threads(threads)
                ts = _time_embeddings(args.n)
                print(
                    f"busy processes {busy}, torch threads {threads}: median {statistics.median(ts):.2f} ms, "
                    f"max {max(ts):.2f} ms"
                )
        finally:
            stop.set()
            for p in procs:
                p.join()


if __name__ == "__main__":
    main()
