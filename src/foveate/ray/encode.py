"""``encode_dataset``: encode a corpus into a texture dataset on a Ray cluster.

The driver lists the inputs (or takes a Ray Dataset of image bytes or paths), drops the sources the output
already holds, and streams the rest in blocks of ``batch_size`` through ``map_batches`` on an actor pool.  Each
worker loads the encoder's models (OCR, MiniLM, a semantic model) once, reads and encodes its batch, and writes
it as one part of the output -- the texture bytes never travel back through the object store.  Only a small
summary row per image does, which the driver counts.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from typing import Any

from ..core.config import EncodeConfig
from ..core.errors import ConfigError, FoveateError
from .dataset import (
    KeySet,
    LeaseLost,
    check_output,
    dedupe,
    is_uri,
    prepare_output,
    scan,
    texture_manifest,
    texture_schema,
    write_part,
)
from .runtime import JobSummary, check_concurrency, connect, drain, pool, summary_table
from .sources import expand_sources, read_location

_BYTES_COLUMNS = ("bytes", "image")
_PATH_COLUMNS = ("path", "source", "uri")


def set_threads(threads: int) -> None:
    """OpenCV and the OCR's onnxruntime get the CPUs Ray reserved for this worker (their results do not depend on
    the thread count), and the OCR runs beside the other channel groups only when the worker holds more than one
    CPU: two workers on two cores, each running the OCR on every core, ran slower than one.  torch keeps the thread
    count a plain process on this node has -- Ray sets ``OMP_NUM_THREADS=1`` -- because MiniLM's line embeddings
    (and a semantic model's features) change in the last bits with it: so a worker's textures equal, bit for bit,
    what ``foveate encode`` writes on the same node.  Call before the first encode (the OCR engine reads its
    thread count when it loads)."""
    import cv2
    import torch

    cv2.setNumThreads(threads)
    os.environ["FOVEATE_OCR_THREADS"] = str(threads)
    os.environ["FOVEATE_ENCODE_OVERLAP"] = "1" if threads > 1 else "0"
    torch.set_num_threads(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def warm_image():
    """A small image with printed text: encoding it loads every model the config uses (OCR, MiniLM, ...)."""
    import cv2
    import numpy as np

    img = np.full((96, 384, 3), 255, np.uint8)
    cv2.putText(img, "Total due: 42.00", (12, 60), cv2.FONT_HERSHEY_SIMPLEX, 1.2, (0, 0, 0), 2, cv2.LINE_AA)
    return img


class EncodeWorker:
    """One actor of the pool: encodes batches of images and writes each as a part of the output dataset."""

    def __init__(
        self,
        config: dict,
        output: str,
        job: str,
        columns: dict[str, str | None],
        done_sources: KeySet,
        done_ids: KeySet,
        device: str = "cpu",
        threads: int = 1,
    ) -> None:
        from ..core.device import resolve_device, tune_allocator
        from ..core.texture import encode_array

        set_threads(threads)
        tune_allocator()  # a worker process encodes many images: keep freed memory for the next (foveate.core.device)
        self.config = EncodeConfig.from_dict(config)
        self.device = resolve_device(device)
        self.output, self.job, self.columns = output, job, columns
        self.done_sources, self.done_ids = done_sources, done_ids
        self.meta = {k: v for k, v in texture_manifest(self.config).items() if k != "config"}
        t0 = time.perf_counter()
        encode_array(warm_image(), self.config, self.device)
        self.warm_ms = (time.perf_counter() - t0) * 1000.0

    def _encode_one(self, source: str | None, location: str | None, data: bytes | None) -> dict[str, Any]:
        from ..core.io import load_image
        from ..core.texture import content_hash, encode_array, texture_id

        row: dict[str, Any] = {
            "id": None,
            "source": source,
            "width": None,
            "height": None,
            "preset": self.config.preset,
            "texture": None,
            "texture_size": None,
            "encode_ms": None,
            "error": None,
        }
        try:
            t0 = time.perf_counter()
            if data is None:
                if location is None:
                    raise FoveateError("the row holds no image bytes and no path")
                try:
                    data = read_location(location)
                except OSError as exc:
                    raise FoveateError(f"cannot read {location}: {exc.strerror or exc}") from exc
            rgb = load_image(data, max_pixels=self.config.max_pixels)
            chash = content_hash(rgb)
            row.update(id=texture_id(chash, self.config), height=int(rgb.shape[0]), width=int(rgb.shape[1]))
            if row["id"] in self.done_ids:
                return row  # a duplicate: the dataset holds this picture's texture already
            decode_ms = (time.perf_counter() - t0) * 1000.0
            tex = encode_array(rgb, self.config, self.device, decode_ms=decode_ms, content_hash=chash)
            blob = tex.to_bytes()
            row.update(texture=blob, texture_size=len(blob), encode_ms=float(tex.timings_ms["total"]))
        except FoveateError as exc:
            msg = str(exc)  # the row names its source: drop the decoder's "<bytes>: " stand-in for it
            row["error"] = msg[len("<bytes>: ") :] if msg.startswith("<bytes>: ") else msg
        except Exception as exc:  # noqa: BLE001 - one bad image must never fail the job: it becomes its row
            row["error"] = f"{type(exc).__name__}: {exc}"
        return row

    def __call__(self, batch):
        import pyarrow as pa

        t0 = time.time()
        cols = {k: batch.column(v).to_pylist() if v else [None] * batch.num_rows for k, v in self.columns.items()}
        rows: list[dict[str, Any]] = []
        summary: dict[str, list[Any]] = {k: [] for k in ("key", "id", "status", "error", "ms", "bytes")}
        for source, location, data in zip(cols["source"], cols["location"], cols["data"]):
            if source is not None and source in self.done_sources:
                status, row = "skipped", None
            else:
                row = self._encode_one(source, location, data)
                rows.append(row)
                status = "failed" if row["error"] else "encoded" if row["texture"] is not None else "duplicate"
            summary["key"].append(source)
            summary["id"].append(row and row["id"])
            summary["status"].append(status)
            summary["error"].append(row and row["error"])
            summary["ms"].append(row and row["encode_ms"])
            summary["bytes"].append(row and row["texture_size"])
        if rows:
            table = pa.Table.from_pylist(rows, schema=texture_schema())
            keys = [r["source"] if r["source"] is not None else f"{r['id']}:{r['error']}" for r in rows]
            try:
                write_part(self.output, table, keys, self.meta, job=self.job)
            except LeaseLost:  # a newer job owns the output: it will do these images
                summary["status"] = ["abandoned" if st != "skipped" else st for st in summary["status"]]
        n = batch.num_rows
        summary.update(t0=[t0] * n, t1=[time.time()] * n, pid=[os.getpid()] * n)
        return summary_table(summary)


def is_ray_dataset(source: Any) -> bool:
    """A Ray Dataset (told without importing Ray: a path or a list of them is expanded before Ray starts)."""
    return type(source).__module__.partition(".")[0] == "ray"


def _ray_input(source, batch_size: int) -> tuple[Any, dict[str, str | None]]:
    """(the Ray Dataset in blocks of ``batch_size`` rows, which of its columns hold source / location / bytes)."""
    names = source.columns()
    data = next((c for c in _BYTES_COLUMNS if c in names), None)
    path = next((c for c in _PATH_COLUMNS if c in names), None)
    if data is None and path is None:
        raise ConfigError(
            f"the Ray Dataset needs a column of image bytes ({' or '.join(_BYTES_COLUMNS)}) or "
            f"of paths ({', '.join(_PATH_COLUMNS)}); it has {', '.join(names)}"
        )
    columns = {"source": path, "location": None if data else path, "data": data}
    return source.repartition(target_num_rows_per_block=batch_size), columns


def _path_input(ray, pairs: list[tuple[str, str]], done: KeySet, batch_size: int) -> tuple[Any, int, int]:
    """(Ray Dataset of the (source, location) pairs not ``done``, in blocks of ``batch_size``, or ``None`` when all
    are; sources skipped; batches)."""
    import pyarrow as pa

    todo = [(s, loc) for s, loc in pairs if s not in done]
    blocks = [
        pa.table(
            {
                "source": [s for s, _ in todo[i : i + batch_size]],
                "location": [loc for _, loc in todo[i : i + batch_size]],
            }
        )
        for i in range(0, len(todo), batch_size)
    ]
    return (ray.data.from_arrow(blocks) if blocks else None), len(pairs) - len(todo), len(blocks)


def encode_dataset(
    source: str | os.PathLike | Iterable[str | os.PathLike] | Any,
    output: str | os.PathLike,
    *,
    preset: str = "default",
    weights: str | None = None,
    config: EncodeConfig | None = None,
    concurrency: int | tuple[int, int] | None = None,
    batch_size: int = 16,
    cpus_per_worker: int = 1,
    gpus_per_worker: float = 0,
    device: str = "cpu",
    address: str | None = None,
    progress: bool = True,
    on_batch: Callable[[JobSummary], None] | None = None,
) -> JobSummary:
    """Encode every image of ``source`` into the texture dataset at ``output`` on a Ray cluster.

    Args:
        source: a folder (searched recursively for image files), a glob, a path or URI, a list of them (any
            pyarrow filesystem: local, ``s3://``, ``gs://``, ``hdfs://``, ...), or a Ray Dataset with a column of
            image bytes (``bytes`` / ``image``, as ``ray.data.read_binary_files`` gives) or of paths (``path`` /
            ``source`` / ``uri``).
        output: the dataset folder (local path or URI; see :mod:`foveate.ray.dataset` for the layout).
        preset: the channel preset (``fast``, ``default``, ``full``); ``config`` (an :class:`EncodeConfig`)
            replaces it.
        weights: the semantic channels' image-text model (a local checkpoint directory), as ``--semantic-model``.
        concurrency: workers in the actor pool (``(min, max)`` autoscales); default one per
            ``cpus_per_worker`` CPUs of the cluster (for a Ray Dataset, autoscaling from one, so that its reading
            keeps a CPU: a fixed pool holding every CPU would starve it).
        batch_size: images per batch, which is also a part file: a killed job loses at most the batches in
            flight (two per worker).
        cpus_per_worker, gpus_per_worker, device: what each worker reserves and encodes on.
        address: the Ray cluster to join when this process is not connected yet (``None``: ``$RAY_ADDRESS`` or a
            new local cluster).
        progress: Ray Data's progress bars.  on_batch: called with the running :class:`JobSummary`.

    Returns the job's :class:`JobSummary`: counts of ``encoded``, ``failed`` (a row with the error),
    ``duplicate`` (same pixels as a texture written before) and ``skipped`` (already in the output: a rerun
    resumes).
    """
    from ..channels.registry import resolve_groups, with_semantic_model

    started = time.time()
    # everything that can be checked cheaply is, before Ray starts (a local cluster takes 10 s and more)
    config = with_semantic_model(config or EncodeConfig(preset=preset), weights)
    resolve_groups(config)  # a bad preset or group
    if batch_size < 1 or cpus_per_worker < 1:
        raise ConfigError("batch_size and cpus_per_worker must be at least 1")
    if gpus_per_worker < 0:
        raise ConfigError(f"gpus_per_worker must be >= 0, got {gpus_per_worker}")
    check_concurrency(concurrency)
    manifest = texture_manifest(config)
    check_output(output, manifest)  # an empty path, a file, a place that cannot be written, other settings
    out = str(output) if is_uri(output) else os.path.abspath(os.path.expanduser(output))
    pairs = None if is_ray_dataset(source) else expand_sources(source)  # a missing input, a folder without images
    ray = connect(address, progress)
    job = prepare_output(out, manifest)
    written = scan(out, ["id", "source", "texture_size"])
    done_sources = KeySet(written.column("source").to_pylist())
    done_ids = KeySet(
        i for i, size in zip(written.column("id").to_pylist(), written.column("texture_size").to_pylist()) if size
    )
    if pairs is None:
        ds, columns = _ray_input(source, batch_size)
        skipped, batches = 0, None
    else:
        ds, skipped, batches = _path_input(ray, pairs, done_sources, batch_size)
        columns = {"source": "source", "location": "location", "data": None}
    if ds is None:
        summary = JobSummary(seconds=time.time() - started)
    else:
        workers = pool(ray, concurrency, cpus_per_worker, batches, upstream=batches is None)
        ds = ds.map_batches(
            EncodeWorker,
            batch_size=batch_size,
            batch_format="pyarrow",
            compute=workers,
            num_cpus=cpus_per_worker,
            num_gpus=gpus_per_worker or None,
            udf_modifying_row_count=False,
            fn_constructor_kwargs={
                "config": config.to_dict(),
                "output": out,
                "job": job,
                "columns": columns,
                "done_sources": done_sources,
                "done_ids": done_ids,
                "device": device,
                "threads": cpus_per_worker,
            },
        )
        summary = drain(ds, started, on_batch)
        summary.deduplicated = dedupe(out, "source")
    if skipped:
        summary.counts["skipped"] = summary.count("skipped") + skipped
    return summary
