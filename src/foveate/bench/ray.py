"""``foveate bench-ray``: the Ray pipeline (:mod:`foveate.ray`) on one machine, against the local paths.

On the same images, one after the other:

* ``store``: ``foveate encode --store`` (a thread per core, into a fresh SQLite store);
* ``in-process``: the Ray worker's own code (read, decode, encode, serialise, write Parquet parts) called in a
  loop in a fresh process with a Ray worker's environment (``OMP_NUM_THREADS=1``, one OpenCV thread) -- one Ray
  worker minus Ray;
* ``ray-N``: ``encode_dataset`` with N workers on a local cluster started once.

``in-process`` and the Ray runs are repeated ``repeats`` times, in turn (so that a change in the machine's load
hits them alike), and reported by their medians.  Throughput is reported two ways: ``busy`` (from the first batch
a worker started to the last one it finished: the steady state) and end to end (the driver's wall time: the
workers' start and their models included).  Ray's per-image overhead is measured two ways:

* ``ray-1``'s busy time per image minus ``in-process``'s time per image (each repeat against the one before it);
* within the same ``ray-1`` run: its busy time minus the time its worker spent inside its batches, per image --
  the time Ray takes to hand a worker its next batch and take the result back, free of any difference between
  two processes.
"""

from __future__ import annotations

import os
import random
import statistics
import tempfile
import time
from pathlib import Path

from ..core.config import EncodeConfig
from .common import machine_info, write_json


def _dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


def _store_run(paths, config, workers: int, tmp: Path) -> dict:
    from ..store import TextureStore, encode_into_store

    with TextureStore(tmp / "store") as st:
        s = encode_into_store(st, [Path(p) for p in paths], config, workers=workers)
        ids = list(st.ids())
        t0 = time.perf_counter()
        for tid in random.Random(0).sample(ids, min(20, len(ids))):
            st.get(tid)
        get_ms = (time.perf_counter() - t0) * 1000.0 / min(20, len(ids))
    n = len(paths)
    return {
        "images": n,
        "seconds": s.seconds,
        "images_per_s": n / s.seconds,
        "failed": s.count("failed"),
        "bytes_per_image": _dir_bytes(tmp / "store") / n,
        "read_by_id_ms": get_ms,
        "workers": workers,
    }


def _worker_loop(pairs, config_dict: dict, batch_size: int, out: str) -> dict:
    """The body of the ``in-process`` run (in a child process: see :func:`_in_process_run`)."""
    import pyarrow as pa

    from ..ray.dataset import KeySet, prepare_output, texture_manifest
    from ..ray.encode import EncodeWorker

    config = EncodeConfig.from_dict(config_dict)
    job = prepare_output(out, texture_manifest(config))
    worker = EncodeWorker(
        config.to_dict(),
        out,
        job,
        {"source": "source", "location": "location", "data": None},
        KeySet(),
        KeySet(),
        threads=1,
    )
    t0 = time.perf_counter()
    summaries = [
        worker(
            pa.table(
                {
                    "source": [s for s, _ in pairs[i : i + batch_size]],
                    "location": [loc for _, loc in pairs[i : i + batch_size]],
                }
            )
        ).to_pylist()
        for i in range(0, len(pairs), batch_size)
    ]
    return {"seconds": time.perf_counter() - t0, "summaries": summaries, "warm_ms": worker.warm_ms}


def _in_process_run(pairs, config, batch_size: int, out: Path) -> dict:
    """One Ray worker's code without Ray, in a fresh process with a Ray worker's thread environment: not in this
    driver, whose threads and memory the other runs have shaped."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    env_before = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = "1"  # what Ray gives a worker holding one CPU; the child inherits it
    try:
        with ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as ex:
            done = ex.submit(_worker_loop, pairs, config.to_dict(), batch_size, str(out)).result()
    finally:
        if env_before is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = env_before
    seconds, summaries = done["seconds"], done["summaries"]
    encode_ms = [r["ms"] for s in summaries for r in s if r["ms"] is not None]
    n = len(pairs)
    return {
        "images": n,
        "seconds": seconds,
        "images_per_s": n / seconds,
        "ms_per_image": seconds * 1000.0 / n,
        "encode_ms_mean": statistics.fmean(encode_ms),
        "write_and_io_ms_per_image": seconds * 1000.0 / n - statistics.fmean(encode_ms),
        "warm_ms": done["warm_ms"],
    }


def _ray_run(pairs, config, workers: int, batch_size: int, out: Path) -> dict:
    from ..ray import encode_dataset, find_texture
    from ..ray.dataset import scan

    s = encode_dataset(
        [p for p, _ in pairs], out, config=config, concurrency=workers, batch_size=batch_size, progress=False
    )
    d = s.to_dict()
    n = len(pairs)
    steady = s.steady_rate()
    ids = [i for i in scan(out, ["id"]).column("id").to_pylist() if i]
    picks = random.Random(0).sample(ids, min(20, len(ids)))
    t0 = time.perf_counter()
    for tid in picks:
        find_texture(out, tid)
    lookup_ms = (time.perf_counter() - t0) * 1000.0 / len(picks)
    in_call = sum(t1 - t0 for t0, t1, _, _ in s.batches)  # seconds the workers spent inside their batches
    return {
        "workers": workers,
        "workers_seen": d["workers"],
        "images": n,
        "encoded": s.count("encoded"),
        "in_batch_ms_per_image": in_call * 1000.0 / n,
        # one worker: its busy span is its batches plus the gaps Ray leaves between them
        "between_batches_ms_per_image": (d["busy_seconds"] - in_call) * 1000.0 / n if workers == 1 else None,
        "seconds": d["seconds"],
        "busy_seconds": d["busy_seconds"],
        "images_per_s": n / d["seconds"],
        "busy_images_per_s": n / d["busy_seconds"],
        "start_seconds": d["seconds"] - d["busy_seconds"],
        "steady_images_per_s": steady[0] if steady else None,
        "steady_seconds": steady[1] if steady else None,
        "ms_per_image_busy": d["busy_seconds"] * 1000.0 / n,
        "output_bytes_per_image": _dir_bytes(out) / n,
        "texture_bytes_per_image": d["output_bytes"] / max(1, s.count("encoded")),
        "read_by_id_ms": lookup_ms,
        "parts": len(list(out.glob("*.parquet"))),
    }


def _median_run(runs: list[dict]) -> dict:
    """The run of median time per image (its own figures, consistent with each other), with every repeat's time."""
    key = "ms_per_image" if "ms_per_image" in runs[0] else "ms_per_image_busy"
    ranked = sorted(runs, key=lambda r: r[key])
    return {**ranked[(len(ranked) - 1) // 2], "repeats_ms_per_image": [round(r[key], 2) for r in runs]}


def run_dist_bench(
    sources: list[str],
    preset: str = "fast",
    workers: tuple[int, ...] = (1, 2),
    batch_size: int = 16,
    repeats: int = 3,
    store_workers: int | None = None,
    json_path: Path | None = None,
    console=None,
) -> dict:
    import torch

    from ..ray.runtime import connect, require_ray
    from ..ray.sources import expand_sources, read_location

    config = EncodeConfig(preset=preset)
    pairs = expand_sources(sources if len(sources) != 1 else sources[0])
    for _, loc in pairs:  # warm the page cache: every run reads from memory
        read_location(loc)
    store_workers = store_workers or os.cpu_count() or 1
    result: dict = {
        "machine": machine_info(torch.device("cpu")),
        "preset": preset,
        "images": len(pairs),
        "batch_size": batch_size,
        "repeats": repeats,
        "runs": {},
    }
    reps: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="foveate-bench-ray-") as tmp_name:
        tmp = Path(tmp_name)
        result["runs"]["store"] = _store_run([loc for _, loc in pairs], config, store_workers, tmp)
        t0 = time.perf_counter()
        ray = require_ray()
        started_here = not ray.is_initialized()
        if started_here:
            ray.init(num_cpus=os.cpu_count(), logging_level="ERROR", log_to_driver=False)
        connect(progress=False)
        result["ray_start_seconds"] = time.perf_counter() - t0
        try:
            for k in range(repeats):
                reps.setdefault("in-process", []).append(
                    _in_process_run(pairs, config, batch_size, tmp / f"inproc-{k}")
                )
                for w in workers:
                    reps.setdefault(f"ray-{w}", []).append(_ray_run(pairs, config, w, batch_size, tmp / f"ray{w}-{k}"))
        finally:
            if started_here:
                ray.shutdown()
    runs = result["runs"]
    runs.update({name: _median_run(rs) for name, rs in reps.items()})
    inproc = runs["in-process"]
    if "ray-1" in runs:
        overs = [r["ms_per_image_busy"] - i["ms_per_image"] for r, i in zip(reps["ray-1"], reps["in-process"])]
        over = statistics.median(overs)
        result["ray_overhead_ms_per_image"] = over
        result["ray_overhead_repeats_ms"] = [round(o, 2) for o in overs]
        result["ray_overhead_share_of_encode"] = over / inproc["encode_ms_mean"]
        gap = statistics.median(r["between_batches_ms_per_image"] for r in reps["ray-1"])
        result["ray_gap_ms_per_image"] = gap
        result["ray_gap_share_of_encode"] = gap / inproc["encode_ms_mean"]
        one = runs["ray-1"]
        for w in workers:
            r = runs[f"ray-{w}"]
            if w != 1 and r["steady_images_per_s"] and one["steady_images_per_s"]:
                speed = [
                    a["steady_images_per_s"] / b["steady_images_per_s"]
                    for a, b in zip(reps[f"ray-{w}"], reps["ray-1"])
                    if a["steady_images_per_s"] and b["steady_images_per_s"]
                ]
                r["speedup_steady"] = statistics.median(speed)
                r["speedup_steady_repeats"] = [round(x, 3) for x in speed]
                r["speedup_end_to_end"] = statistics.median(
                    a["images_per_s"] / b["images_per_s"] for a, b in zip(reps[f"ray-{w}"], reps["ray-1"])
                )
    if console is not None:
        _report(console, result, workers)
    write_json(result, json_path)
    return result


def _report(console, result: dict, workers) -> None:
    from rich.table import Table

    runs, inproc = result["runs"], result["runs"]["in-process"]
    t = Table("run", "img/s steady", "img/s e2e", "ms/img", "start s", "KiB/img", "by id ms", box=None)
    s = runs["store"]
    t.add_row(
        f"encode --store -w {s['workers']}",
        "",
        f"{s['images_per_s']:.2f}",
        f"{1000 / s['images_per_s']:.1f}",
        "",
        f"{s['bytes_per_image'] / 1024:.0f}",
        f"{s['read_by_id_ms']:.2f}",
    )
    t.add_row(
        "worker, no Ray",
        "",
        f"{inproc['images_per_s']:.2f}",
        f"{inproc['ms_per_image']:.1f}",
        f"{inproc['warm_ms'] / 1000:.1f}",
        "",
        "",
    )
    for w in workers:
        r = runs[f"ray-{w}"]
        steady = f"{r['steady_images_per_s']:.2f}" if r["steady_images_per_s"] else "-"
        t.add_row(
            f"ray, {w} worker{'s' * (w > 1)}",
            steady,
            f"{r['images_per_s']:.2f}",
            f"{r['ms_per_image_busy']:.1f}",
            f"{r['start_seconds']:.1f}",
            f"{r['output_bytes_per_image'] / 1024:.0f}",
            f"{r['read_by_id_ms']:.2f}",
        )
    console.print(
        f"[bold]{result['images']} images, preset {result['preset']}, batch {result['batch_size']}, "
        f"median of {result['repeats']} repeat(s)[/]; "
        f"Ray local cluster start {result['ray_start_seconds']:.1f} s"
    )
    console.print(t)
    if "ray_overhead_ms_per_image" in result:
        console.print(
            f"Ray overhead: {result['ray_overhead_ms_per_image']:.2f} ms/image = "
            f"{100 * result['ray_overhead_share_of_encode']:.1f} % of a {result['preset']} encode "
            f"({inproc['encode_ms_mean']:.1f} ms), per repeat {result['ray_overhead_repeats_ms']} ms; "
            f"between one worker's batches: {result['ray_gap_ms_per_image']:.2f} ms/image = "
            f"{100 * result['ray_gap_share_of_encode']:.1f} %",
            highlight=False,
        )
    for w in workers:
        r = runs[f"ray-{w}"]
        if "speedup_steady" in r:
            console.print(
                f"{w} workers vs 1: {r['speedup_steady']:.2f}x steady (repeats "
                f"{r['speedup_steady_repeats']}, median run {r['steady_seconds']:.1f} s measured), "
                f"{r['speedup_end_to_end']:.2f}x end to end",
                highlight=False,
            )
