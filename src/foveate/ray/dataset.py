"""The texture dataset on disk: a folder (local or on any pyarrow filesystem) of Parquet part files plus a small
manifest, written by :func:`foveate.ray.encode_dataset` and read by everything else.  Needs only pyarrow.

Layout::

    OUT/_foveate.json          what the rows are: kind (textures | selections), encode config, format versions
    OUT/_lease.json            the job that may write now (a restart takes it over; older workers stop writing)
    OUT/part-<hash>.parquet    one part per batch: written whole or not at all (temporary name + rename locally;
                               an object store makes an upload visible only when it completes)

A textures row: ``id`` (:func:`foveate.core.texture.texture_id`, the id the store uses), ``source`` (the path or
URI as given), ``width``, ``height``, ``preset``, ``texture`` (the ``.fvt`` bytes), ``texture_size``,
``encode_ms``, ``error``.  Exactly one of three kinds:

* encoded: ``texture`` set, ``error`` null;
* failed: ``error`` says why (unreadable, not an image, too large, ...), ``texture`` null;
* duplicate: ``texture`` and ``error`` null -- the picture was already in the dataset under this ``id`` (a
  rerun found the same pixels under another source): its texture is on the row of that id that has one.

Part names are a hash of the batch's rows, so a batch Ray retries overwrites its own part instead of adding a
second copy.  Every part also carries the config hash and the texture format version in its Parquet metadata.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.errors import DatasetError, FoveateError
from .schema import (  # noqa: F401 - the rows' schemas, also read from here
    EXTRA_HINT,
    TEXTURE_COLUMNS,
    check_columns,
    json_kind,
    one_line,
    require_pyarrow,
    selection_schema,
    texture_schema,
)

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    from pyarrow import fs as pafs

MANIFEST = "_foveate.json"
LEASE = "_lease.json"
#: Bump when the columns or their meaning change.
DATASET_VERSION = 1
#: rows per Parquet row group: reading one texture by id reads one row group of its part
ROW_GROUP_ROWS = 8


# -- where ------------------------------------------------------------------------------------------------
def is_uri(path: str | os.PathLike) -> bool:
    return "://" in str(path)


def resolve(path: str | os.PathLike) -> tuple[pafs.FileSystem, str]:
    """(filesystem, path inside it) for a local path (made absolute: workers may run elsewhere) or a URI."""
    require_pyarrow()
    from pyarrow import fs as pafs

    if is_uri(path):
        try:
            return pafs.FileSystem.from_uri(str(path))
        except Exception as exc:  # pyarrow raises ArrowInvalid / OSError / ValueError by scheme
            raise DatasetError(f"cannot open {path}: {exc}") from exc
    return pafs.LocalFileSystem(), str(Path(path).expanduser().absolute())


# -- manifest ---------------------------------------------------------------------------------------------
def read_manifest(where: str | os.PathLike, kind: str | None = None) -> dict | None:
    """The manifest of the dataset at ``where``; ``None`` when the folder holds none (a new output)."""
    fs, root = resolve(where)
    from pyarrow import fs as pafs

    info = fs.get_file_info(f"{root}/{MANIFEST}")
    if info.type == pafs.FileType.NotFound:
        return None
    try:
        with fs.open_input_stream(info.path) as f:
            doc = json.loads(f.read())
    except (OSError, ValueError) as exc:
        raise DatasetError(f"{where}: unreadable {MANIFEST} ({one_line(exc)})") from exc
    if not isinstance(doc, dict):
        raise DatasetError(
            f"{where}: {MANIFEST} is not a foveate dataset manifest (it holds {json_kind(doc)}, not an object); "
            "write the dataset again"
        )
    if doc.get("format") != "foveate-dataset":
        raise DatasetError(f"{where}: {MANIFEST} is not a foveate dataset manifest")
    if doc.get("dataset_version") != DATASET_VERSION:
        raise DatasetError(
            f"{where}: dataset version {doc.get('dataset_version')} is not read by this foveate "
            f"(reads {DATASET_VERSION}); write the dataset again"
        )
    if kind is not None and doc.get("kind") != kind:
        raise DatasetError(f"{where} holds {doc.get('kind')}, not {kind}")
    return doc


def open_manifest(where: str | os.PathLike, kind: str) -> dict:
    """:func:`read_manifest` of an existing dataset; a clear error when there is none."""
    doc = read_manifest(where, kind)
    if doc is None:
        raise DatasetError(
            f"{where}: not a foveate {kind} dataset (no {MANIFEST}); write one with "
            f"{'foveate encode --ray' if kind == 'textures' else 'foveate.ray.select_dataset'}"
        )
    return doc


def write_manifest(where: str | os.PathLike, doc: dict) -> None:
    fs, root = resolve(where)
    fs.create_dir(root, recursive=True)
    _write_atomic(
        fs,
        root,
        MANIFEST,
        json.dumps({"format": "foveate-dataset", "dataset_version": DATASET_VERSION, **doc}, indent=1).encode(),
    )


def texture_manifest(config) -> dict:
    """What a textures dataset promises: every row was encoded with ``config`` in this texture format."""
    from ..core.fvt import FORMAT_VERSION

    return {
        "kind": "textures",
        "texture_format_version": FORMAT_VERSION,
        "config_hash": config.hash(),
        "preset": config.preset,
        "config": config.to_dict(),
    }


def check_texture_manifest(where, doc: dict) -> None:
    from ..core.fvt import FORMAT_VERSION

    if doc.get("texture_format_version") != FORMAT_VERSION:
        raise DatasetError(
            f"{where}: textures of format version {doc.get('texture_format_version')}; this "
            f"foveate reads version {FORMAT_VERSION}: encode them again into a new dataset"
        )


def check_output(where: str | os.PathLike, manifest: Mapping[str, Any] | None = None) -> None:
    """Refuse an output a job could not write, before any work starts (no cluster, nothing written): an empty path,
    a file, a folder that cannot be created or written, or a dataset written with other settings than
    ``manifest``'s (a resume must use the same ones).  An object store's permissions show only when writing."""
    if not str(where).strip():
        raise DatasetError("the output is an empty path: give the dataset's folder (a local path or a URI)")
    fs, root = resolve(where)
    if fs.type_name == "local":
        _check_local_output(where, Path(root))
    else:
        from pyarrow import fs as pafs

        try:
            info = fs.get_file_info(root)
        except OSError as exc:
            raise DatasetError(f"cannot reach the output {where}: {one_line(exc)}") from exc
        if info.type == pafs.FileType.File:
            raise DatasetError(f"{where} is a file, not a dataset folder: give a new folder, or a dataset to resume")
    if manifest is not None:
        old = read_manifest(where)
        if old is not None:
            _check_resume(where, old, manifest)


def _check_local_output(where: str | os.PathLike, path: Path) -> None:
    if path.exists() and not path.is_dir():
        raise DatasetError(f"{where} is a file, not a dataset folder: give a new folder, or a dataset to resume")
    there = path
    while not there.exists() and there.parent != there:
        there = there.parent  # the folder the job would create the output in
    if not there.is_dir():
        raise DatasetError(f"{where}: cannot create the dataset's folder there, {there} is a file")
    if not os.access(there, os.W_OK | os.X_OK):
        raise DatasetError(f"{where}: cannot write the dataset there, {there} is not writable")


def _check_resume(where: str | os.PathLike, old: Mapping[str, Any], manifest: Mapping[str, Any]) -> None:
    if old.get("kind") != manifest["kind"]:
        raise DatasetError(f"{where} already holds {old.get('kind')}; write {manifest['kind']} elsewhere")
    for key in ("config_hash", "texture_format_version", "textures"):
        if key in manifest and old.get(key) != manifest[key]:
            raise DatasetError(
                f"{where} was written with other settings ({key} {old.get(key)!r}, now {manifest[key]!r}); "
                "resume it with the same settings or write to a new folder"
            )


def prepare_output(where: str | os.PathLike, manifest: dict) -> str:
    """Create the output folder with ``manifest``, or check that the one there matches it (a resume), and take
    the output's lease for a new job.  Returns the job's id: a worker of an older job that still runs (its driver
    was killed a moment ago, or another job on the same output) finds the lease gone and writes nothing more.
    Leftover temporary files of killed writers are removed.  An output that cannot be written is a
    :class:`DatasetError` (:func:`check_output`)."""
    check_output(where, manifest)
    try:
        if read_manifest(where) is None:
            write_manifest(where, manifest)
        fs, root = resolve(where)
        job = uuid.uuid4().hex
        _write_atomic(fs, root, LEASE, json.dumps({"job": job, "started": time.time()}).encode())
        remove_temporaries(where)
    except OSError as exc:  # pyarrow's errors of a file system are OSErrors
        raise DatasetError(f"cannot write the dataset {where}: {one_line(exc)}") from exc
    return job


def lease_holder(where: str | os.PathLike) -> str | None:
    """The id of the job that may write the dataset now."""
    return _lease_of(*resolve(where))


def _lease_of(fs, root: str) -> str | None:
    try:
        with fs.open_input_stream(f"{root}/{LEASE}") as f:
            return json.loads(f.read()).get("job")
    except (OSError, ValueError):
        return None


class LeaseLost(FoveateError):
    """Another job took over the output: this worker's batch is not written."""


# -- parts ------------------------------------------------------------------------------------------------
def _write_atomic(fs, root: str, name: str, data: bytes | None = None, table=None, job: str | None = None) -> str:
    """Write ``data`` (bytes) or ``table`` (Parquet) as ``root/name``, all or nothing; with ``job``, only while
    that job holds the lease (checked just before the part becomes visible)."""
    import pyarrow.parquet as pq

    final = f"{root}/{name}"
    # rename is atomic where a local or HDFS file is visible while written; object stores publish on close
    staged = fs.type_name in ("local", "hdfs")
    target = f"{root}/.{name}.{uuid.uuid4().hex[:12]}.tmp" if staged else final
    if job is not None and not staged and _lease_of(fs, root) != job:
        raise LeaseLost(f"another job took over {root}; this batch is not written")
    try:
        if table is None:
            with fs.open_output_stream(target) as f:
                f.write(data)
        else:
            pq.write_table(
                table,
                target,
                filesystem=fs,
                compression="zstd",
                compression_level=1,
                row_group_size=ROW_GROUP_ROWS,
                use_dictionary=False,
                write_page_checksum=True,
                write_statistics=[c for c in table.column_names if c not in ("texture", "selection", "vlm", "query")],
            )
        if job is not None and _lease_of(fs, root) != job:
            raise LeaseLost(f"another job took over {root}; this batch is not written")
        if staged:
            fs.move(target, final)
    finally:
        if staged:
            try:
                fs.delete_file(target)
            except (FileNotFoundError, OSError):
                pass
    return final


def part_name(keys: Iterable[str], salt: str) -> str:
    """A part's file name: a hash of its rows' keys (sources, ids or query ids) and the config, so a retried
    batch overwrites its own part."""
    h = hashlib.sha256(salt.encode())
    for k in keys:
        h.update(b"\0" + str(k).encode())
    return f"part-{h.hexdigest()[:32]}.parquet"


def write_part(
    where: str | os.PathLike, table: pa.Table, keys: Iterable[str], meta: Mapping[str, Any], job: str | None = None
) -> str:
    """Write ``table`` as one part of the dataset at ``where`` (while ``job`` holds its lease: else
    :class:`LeaseLost`); returns its path."""
    fs, root = resolve(where)
    meta_json = json.dumps(dict(meta), sort_keys=True)
    table = table.replace_schema_metadata({"foveate": meta_json})
    return _write_atomic(fs, root, part_name(keys, meta_json), table=table, job=job)


def dedupe(where: str | os.PathLike, key: str) -> int:
    """Keep one row per ``key`` (the first, in part order): rewrite the parts holding later copies without them.
    Normally there are none; they can only come from a worker of a killed job that wrote its part in the moment
    between the next job taking the lease and scanning.  Returns the rows removed."""
    fs, _ = resolve(where)
    t = scan(where, [key])
    seen: set = set()
    drop: dict[str, set[int]] = {}
    for k, part, row in zip(*(t.column(c).to_pylist() for c in (key, "_part", "_row"))):
        if k is None:
            continue
        if k in seen:
            drop.setdefault(part, set()).add(row)
        seen.add(k)
    for part, rows in drop.items():
        table = _parquet(fs, part).read()
        meta = json.loads((table.schema.metadata or {}).get(b"foveate", b"{}"))
        kept = table.take([i for i in range(table.num_rows) if i not in rows])
        if kept.num_rows:
            write_part(where, kept.replace_schema_metadata(None), kept.column(key).to_pylist(), meta)
        fs.delete_file(part)
    return sum(map(len, drop.values()))


def part_files(where: str | os.PathLike) -> list[str]:
    """The part files of the dataset at ``where`` (paths inside its filesystem), sorted."""
    from pyarrow import fs as pafs

    fs, root = resolve(where)
    infos = fs.get_file_info(pafs.FileSelector(root, allow_not_found=True))
    return sorted(
        i.path
        for i in infos
        if i.type == pafs.FileType.File and i.base_name.endswith(".parquet") and not i.base_name.startswith((".", "_"))
    )


def remove_temporaries(where: str | os.PathLike) -> int:
    from pyarrow import fs as pafs

    fs, root = resolve(where)
    infos = fs.get_file_info(pafs.FileSelector(root, allow_not_found=True))
    tmp = [
        i.path
        for i in infos
        if i.type == pafs.FileType.File and i.base_name.startswith(".") and i.base_name.endswith(".tmp")
    ]
    for p in tmp:
        fs.delete_file(p)
    return len(tmp)


def _parquet(fs, path: str, columns: Iterable[str] = ()):
    """The Parquet file of a part, checked to hold ``columns`` of the types a dataset's rows have."""
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(fs.open_input_file(path), page_checksum_verification=True)
    except Exception as exc:  # ArrowInvalid / OSError: truncated, not Parquet
        raise DatasetError(
            f"part {path} is not readable Parquet ({one_line(exc)}); delete it and run the job again to redo its rows"
        ) from exc
    check_columns(path, pf.schema_arrow, columns)
    return pf


def scan(where: str | os.PathLike, columns: Iterable[str]) -> pa.Table:
    """``columns`` of every row, plus ``_part`` (the part's path) and ``_row`` (the row inside it).  Reads only
    those columns -- never the texture bytes unless asked."""
    pa = require_pyarrow()
    fs, _ = resolve(where)
    columns = list(columns)
    tables = []
    for path in part_files(where):
        pf = _parquet(fs, path, columns)
        try:
            t = pf.read(columns=columns)
        except Exception as exc:
            raise DatasetError(f"part {path}: cannot read columns {columns} ({one_line(exc)})") from exc
        n = t.num_rows
        tables.append(
            t.append_column("_part", pa.array([path] * n, pa.string())).append_column(
                "_row", pa.array(np.arange(n, dtype=np.int64))
            )
        )
    if not tables:
        return pa.table(
            {
                **{c: pa.array([], pa.string()) for c in columns},
                "_part": pa.array([], pa.string()),
                "_row": pa.array([], pa.int64()),
            }
        )
    return pa.concat_tables(tables, promote_options="permissive")


def read_rows(where: str | os.PathLike, part: str, rows: Iterable[int], columns: Iterable[str]) -> pa.Table:
    """``rows`` of one part (in that order), reading only the row groups that hold them."""
    pa = require_pyarrow()
    fs, _ = resolve(where)
    columns = list(columns)
    pf = _parquet(fs, part, columns)
    rows = [int(r) for r in rows]
    sizes = [pf.metadata.row_group(g).num_rows for g in range(pf.metadata.num_row_groups)]
    starts = np.cumsum([0] + sizes)
    group_of = [int(np.searchsorted(starts, r, side="right")) - 1 for r in rows]
    groups = sorted(set(group_of))
    t = pf.read_row_groups(groups, columns=columns)
    first = dict(zip(groups, np.cumsum([0] + [sizes[g] for g in groups]).tolist()))  # group -> its first row in t
    take = [first[g] + r - int(starts[g]) for r, g in zip(rows, group_of)]
    return t.take(pa.array(take, pa.int64()))


def iter_parts(where: str | os.PathLike, columns: Iterable[str]) -> Iterator[pa.Table]:
    """Every part's ``columns``, one table per row group (bounded memory: a row group is a few textures).  A part
    without them, or one that cannot be read, is a :class:`DatasetError`."""
    for _, _, table in iter_row_groups(where, columns):
        yield table


def iter_row_groups(where: str | os.PathLike, columns: Iterable[str]) -> Iterator[tuple[str, int, pa.Table]]:
    """(part path, index of the group's first row in the part, ``columns`` of the group) for every row group."""
    fs, _ = resolve(where)
    columns = list(columns)
    for path in part_files(where):
        pf = _parquet(fs, path, columns)
        first = 0
        for g in range(pf.metadata.num_row_groups):
            try:
                table = pf.read_row_group(g, columns=columns)
            except Exception as exc:  # a damaged page (checksum), a truncated column chunk
                raise DatasetError(
                    f"part {path}: row group {g} is not readable ({one_line(exc)}); delete the part and run the "
                    "job again to redo its rows"
                ) from exc
            yield path, first, table
            first += table.num_rows


class KeySet:
    """A set of strings held as sorted 16-byte digests: 160 MB for 10^7 keys, shared read-only by every worker
    on a node through Ray's object store (a NumPy array is read zero-copy)."""

    def __init__(self, keys: Iterable[str | None] = ()) -> None:
        self.digests = np.unique(np.array([self.digest(k) for k in keys if k is not None], dtype="S16"))

    @staticmethod
    def digest(key: str) -> bytes:
        return hashlib.blake2b(key.encode(), digest_size=16).digest()

    def __len__(self) -> int:
        return int(self.digests.shape[0])

    def __contains__(self, key: str | None) -> bool:
        if key is None or not len(self):
            return False
        d = np.array(self.digest(key), dtype="S16")
        i = int(np.searchsorted(self.digests, d))
        return i < len(self) and self.digests[i] == d
