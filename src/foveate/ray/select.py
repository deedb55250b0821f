"""``select_dataset``: answer a table of queries from a texture dataset on a Ray cluster.

The driver joins the queries with the dataset's index (``id``, ``source`` and where each texture is -- no texture
bytes are read for it) and streams the work, sorted by part, through an actor pool.  Each worker reads only the
row groups holding its textures, selects, and writes one part of selection rows: ``qid``, ``id``, ``source``,
``query`` (JSON), ``budget``, ``mode``, ``num_tokens``, ``selection`` (the ``selection.json`` document, crop plan
included, as ``foveate select --json`` prints it), ``vlm`` (what the ``vlm=`` hook returned, JSON), ``select_ms``,
``error``.  Resumable by ``qid``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

from ..core.config import DEFAULT_BUDGET, SelectConfig
from ..core.errors import ConfigError, DatasetError, FoveateError
from .dataset import (
    LeaseLost,
    check_output,
    dedupe,
    is_uri,
    prepare_output,
    read_rows,
    require_pyarrow,
    scan,
    selection_schema,
    write_part,
)
from .encode import set_threads, warm_image
from .reader import open_textures
from .runtime import JobSummary, check_concurrency, connect, drain, pool, summary_table

#: a vlm hook: (texture, selection) -> anything JSON can write (a crop plan, a request body, ...)
VlmHook = Callable[[Any, Any], Any]


def load_queries(queries) -> list[dict]:
    """Rows of a queries table: a Parquet, JSONL or CSV file, a pyarrow Table, a pandas DataFrame, a Ray Dataset
    or a list of dicts.  Each row names a texture by ``id`` or ``source`` and asks ``query`` (text, or a dict of
    ``text``/``points``/``point_labels``/``boxes``), optionally with ``points``, ``point_labels``, ``boxes``,
    ``budget``, ``mode`` and its own ``qid`` (default: the row number)."""
    pa = require_pyarrow()
    if isinstance(queries, (str, os.PathLike)):
        path = os.fspath(queries)
        if path.endswith(".parquet"):
            import pyarrow.parquet as pq

            return pq.read_table(path).to_pylist()
        if path.endswith(".csv"):
            import pyarrow.csv as pcsv

            return pcsv.read_csv(path).to_pylist()
        rows = []
        n = 0  # the line being read (named when it is not JSON)
        try:
            with open(path, encoding="utf-8") as f:
                for n, line in enumerate(f, 1):  # noqa: B007
                    if line.strip():
                        rows.append(json.loads(line))
        except OSError as exc:
            raise DatasetError(f"cannot read the queries {path}: {exc.strerror or exc}") from exc
        except ValueError as exc:
            raise DatasetError(f"{path} line {n}: not JSON ({exc})") from exc
        return rows
    if isinstance(queries, pa.Table):
        return queries.to_pylist()
    if hasattr(queries, "to_arrow_refs"):  # a Ray Dataset
        return queries.to_pandas().to_dict("records")
    if hasattr(queries, "to_dict") and hasattr(queries, "columns"):  # a pandas DataFrame
        return queries.to_dict("records")
    return [dict(q) for q in queries]


def _get(row: dict, key: str):
    """``row[key]``, ``None`` when missing or a missing number (pandas writes NaN)."""
    v = row.get(key)
    return None if isinstance(v, float) and v != v else v


def _plain(v):
    """Lists of numbers from whatever a table held (NumPy arrays from pandas, tuples, lists)."""
    v = v.tolist() if hasattr(v, "tolist") else v
    return [_plain(x) for x in v] if isinstance(v, (list, tuple)) else v


def _query_of(row: dict) -> dict:
    q = _get(row, "query")
    fields = dict(q) if isinstance(q, dict) else {"text": q if q is not None else _get(row, "text")}
    for k in ("points", "point_labels", "boxes"):
        if _get(row, k) is not None and k not in fields:
            fields[k] = _plain(row[k])
    return {k: v for k, v in fields.items() if v is not None}


def _work(queries: list[dict], index, done: set[int], budget: int, mode: str) -> tuple[list[dict], int]:
    """One work item per query not done yet: where its texture is, or why there is none."""
    where: dict[str, tuple[str, int]] = {}
    by_source: dict[str, tuple[str | None, str | None]] = {}
    first_source: dict[str | None, str] = {}
    for tid, src, size, err, part, row in zip(
        *(index.column(c).to_pylist() for c in ("id", "source", "texture_size", "error", "_part", "_row"))
    ):
        if size and tid not in where:
            where[tid] = (part, row)
        if src is not None:
            by_source.setdefault(src, (tid, err))
            first_source.setdefault(tid, src)
    items, skipped, seen = [], 0, set()
    for n, row in enumerate(queries):
        qid = int(_get(row, "qid")) if _get(row, "qid") is not None else n
        if qid in seen:
            raise ConfigError(f"query id {qid} is given twice; qid must be unique")
        seen.add(qid)
        if qid in done:
            skipped += 1
            continue
        tid, src, error = _get(row, "id"), _get(row, "source"), None
        if tid is None and src is None:
            error = "the query names no texture: give an id or a source"
        elif tid is None and src not in by_source:
            error = f"no image {src!r} in the textures dataset"
        elif tid is None:
            tid, failed = by_source[src]
            error = f"{src} could not be encoded: {failed}" if failed else None
        src = src if src is not None else first_source.get(tid)
        part, prow = where.get(tid, (None, None)) if tid else (None, None)
        if part is None and error is None:
            error = f"no texture {tid} in the textures dataset"
        items.append(
            {
                "qid": qid,
                "id": tid,
                "source": src,
                "part": part,
                "row": prow,
                "error": error,
                "query": json.dumps(_query_of(row)),
                "budget": int(_get(row, "budget") or budget),
                "mode": _get(row, "mode") or mode,
            }
        )
    items.sort(key=lambda r: (r["part"] or "", r["row"] or 0, r["qid"]))
    return items, skipped


def select_kwargs(weights, scorer) -> dict[str, Any]:
    """What ``select`` gets besides the query: a ``scorer`` object, or relevance ``weights`` (``default``,
    ``handset`` or a file from ``foveate train``), checked here so that a bad file fails before the job starts."""
    kw: dict[str, Any] = {}
    if scorer is not None:
        kw["scorer"] = scorer
    if weights is not None:
        from ..weights import load_weights

        load_weights(weights)
        kw["weights"] = str(weights)
    return kw


class SelectWorker:
    """One actor of the pool: selects for a batch of queries and writes the results as a part."""

    def __init__(
        self,
        textures: str,
        output: str,
        job: str,
        select: dict[str, Any],
        vlm: VlmHook | None,
        max_crops: int | None,
        rule: str,
        threads: int = 1,
    ) -> None:
        from ..core.config import EncodeConfig
        from ..core.texture import encode_array
        from ..selection import select as select_tokens

        set_threads(threads)
        self.textures, self.output, self.job, self.kw, self.vlm = textures, output, job, select, vlm
        self.max_crops, self.rule = max_crops, rule
        # load MiniLM (a text question's embedding) once, before the first batch
        select_tokens(encode_array(warm_image(), EncodeConfig(preset="fast")), "total due", cut=False, **self.kw)

    def _one(self, item: dict, tex) -> dict[str, Any]:
        from ..render.crops import plan_crops
        from ..selection import select as select_tokens

        out = {k: item[k] for k in ("qid", "id", "source", "query", "budget", "mode")}
        out.update(num_tokens=None, selection=None, vlm=None, select_ms=None, error=item["error"])
        if tex is None:
            return out
        try:
            t0 = time.perf_counter()
            sel = select_tokens(
                tex, json.loads(item["query"]), budget=item["budget"], mode=item["mode"], cut=False, **self.kw
            )
            doc = sel.to_dict()
            doc["crops"] = plan_crops(sel, self.rule, max_crops=self.max_crops).to_dict()
            out.update(
                num_tokens=len(sel),
                selection=json.dumps(doc),
                vlm=json.dumps(self.vlm(tex, sel)) if self.vlm is not None else None,
                select_ms=(time.perf_counter() - t0) * 1000.0,
            )
        except FoveateError as exc:
            out["error"] = str(exc)
        except Exception as exc:  # noqa: BLE001 - one bad query must never fail the job: it becomes its row
            out["error"] = f"{type(exc).__name__}: {exc}"
        return out

    def _textures(self, items: list[dict]) -> dict[tuple[str, int], Any]:
        from ..core.texture import Texture

        wanted: dict[str, list[int]] = {}
        for it in items:
            if it["part"] is not None and it["error"] is None:
                wanted.setdefault(it["part"], []).append(it["row"])
        texs: dict[tuple[str, int], Any] = {}
        for part, rows in wanted.items():
            rows = sorted(set(rows))
            for r, data in zip(rows, read_rows(self.textures, part, rows, ["texture"]).column("texture").to_pylist()):
                texs[(part, r)] = Texture.load(data)
        return texs

    def __call__(self, batch):
        import pyarrow as pa

        t0 = time.time()
        items = batch.to_pylist()
        try:
            texs = self._textures(items)
        except FoveateError as exc:  # an unreadable part: every query of this batch says so
            texs = {}
            for it in items:
                it["error"] = it["error"] or str(exc)
        rows = [self._one(it, texs.get((it["part"], it["row"]))) for it in items]
        status = ["failed" if r["error"] else "selected" for r in rows]
        try:
            write_part(
                self.output,
                pa.Table.from_pylist(rows, schema=selection_schema()),
                [r["qid"] for r in rows],
                {"kind": "selections"},
                job=self.job,
            )
        except LeaseLost:
            status = ["abandoned"] * len(rows)
        n = len(rows)
        return summary_table(
            {
                "key": [str(r["qid"]) for r in rows],
                "id": [r["id"] for r in rows],
                "status": status,
                "error": [r["error"] for r in rows],
                "ms": [r["select_ms"] for r in rows],
                "bytes": [len(r["selection"] or "") for r in rows],
                "t0": [t0] * n,
                "t1": [time.time()] * n,
                "pid": [os.getpid()] * n,
            }
        )


def select_dataset(
    textures: str | os.PathLike,
    queries,
    output: str | os.PathLike,
    *,
    budget: int = DEFAULT_BUDGET,
    mode: str = "auto",
    weights: str | os.PathLike | None = None,
    scorer=None,
    vlm: VlmHook | None = None,
    max_crops: int | None = None,
    rule: str = "openai",
    concurrency: int | tuple[int, int] | None = None,
    batch_size: int = 64,
    cpus_per_worker: int = 1,
    address: str | None = None,
    progress: bool = True,
) -> JobSummary:
    """Answer every query of ``queries`` from the texture dataset ``textures`` and write the selections to the
    dataset ``output`` on a Ray cluster.

    Args:
        textures: a dataset written by :func:`foveate.ray.encode_dataset` (path or URI).
        queries: see :func:`load_queries` -- rows naming a texture by ``id`` or ``source`` and a ``query``.
        budget, mode: defaults for rows without their own ``budget`` / ``mode``.
        weights: relevance weights (``default``, ``handset`` or a file from ``foveate train``); ``scorer``: a
            :class:`foveate.Scorer` object instead.
        vlm: a hook ``(texture, selection) -> JSON-able`` run after each selection (e.g. the crop plan a VLM
            hand-off needs); its result lands in the ``vlm`` column.
        max_crops, rule: the crop plan in the selection document, under this VLM rule (as ``foveate select
            --vlm``; :mod:`foveate.vlm`).
        concurrency, batch_size, cpus_per_worker, address, progress: as :func:`encode_dataset`.

    Returns the job's :class:`JobSummary` (``selected``, ``failed`` -- a row with the error --, ``skipped``:
    already in the output).  A query whose texture is missing or failed to encode is a row with the error.
    """
    SelectConfig(budget=budget, mode=mode)  # validate the defaults before any cluster work
    if vlm is not None and not callable(vlm):
        raise ConfigError("vlm must be a callable (texture, selection) -> JSON-able, e.g. a crop planner")
    if batch_size < 1 or cpus_per_worker < 1:
        raise ConfigError("batch_size and cpus_per_worker must be at least 1")
    kw = select_kwargs(weights, scorer)
    started = time.time()
    check_concurrency(concurrency)
    src = str(textures) if is_uri(textures) else os.path.abspath(os.path.expanduser(textures))
    manifest = {"kind": "selections", "textures": src}
    check_output(output, manifest)  # before Ray starts: an empty path, a file, a place that cannot be written
    out = str(output) if is_uri(output) else os.path.abspath(os.path.expanduser(output))
    open_textures(src)
    rows = load_queries(queries)
    ray = connect(address, progress)
    job = prepare_output(out, manifest)
    done = set(scan(out, ["qid"]).column("qid").to_pylist())
    items, skipped = _work(rows, scan(src, ["id", "source", "texture_size", "error"]), done, budget, mode)
    summary = JobSummary()
    if items:
        pa = require_pyarrow()
        schema = pa.schema(
            [
                ("qid", pa.int64()),
                ("id", pa.string()),
                ("source", pa.string()),
                ("part", pa.string()),
                ("row", pa.int64()),
                ("error", pa.string()),
                ("query", pa.string()),
                ("budget", pa.int32()),
                ("mode", pa.string()),
            ]
        )
        blocks = [
            pa.Table.from_pylist(items[i : i + batch_size], schema=schema) for i in range(0, len(items), batch_size)
        ]
        ds = ray.data.from_arrow(blocks).map_batches(
            SelectWorker,
            batch_size=batch_size,
            batch_format="pyarrow",
            compute=pool(ray, concurrency, cpus_per_worker, len(blocks)),
            num_cpus=cpus_per_worker,
            udf_modifying_row_count=False,
            fn_constructor_kwargs={
                "textures": src,
                "output": out,
                "job": job,
                "select": kw,
                "vlm": vlm,
                "max_crops": max_crops,
                "rule": rule,
                "threads": cpus_per_worker,
            },
        )
        summary = drain(ds, started)
        summary.deduplicated = dedupe(out, "qid")
    summary.seconds = time.time() - started
    if skipped:
        summary.counts["skipped"] = summary.count("skipped") + skipped
    return summary
