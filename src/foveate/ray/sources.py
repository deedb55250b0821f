"""What ``encode_dataset`` reads: a folder, a glob, a list of paths or URIs on any pyarrow filesystem (expanded
on the driver into (source as given, location a worker can open) pairs), and the bytes behind a location (read
on the worker)."""

from __future__ import annotations

import fnmatch
import functools
import glob
import os
from collections.abc import Iterable
from pathlib import Path

from ..core.errors import DatasetError
from ..store.ingest import IMAGE_SUFFIXES
from .dataset import is_uri, resolve

_GLOB_CHARS = set("*?[")


def _is_image(name: str) -> bool:
    return os.path.splitext(name)[1].lower() in IMAGE_SUFFIXES


def _as_uri(base_uri: str, base_root: str, fs_path: str) -> str:
    """A path the filesystem listed under ``base_root`` as a URI written like ``base_uri`` (``s3://b/x.jpg``)."""
    return base_uri.rstrip("/") + fs_path[len(base_root.rstrip("/")) :]


def _expand_uri(uri: str, strict: bool) -> list[tuple[str, str]]:
    from pyarrow import fs as pafs

    if _GLOB_CHARS & set(uri):
        base = uri[: min(uri.index(c) for c in _GLOB_CHARS if c in uri)].rsplit("/", 1)[0]
        fs, root = resolve(base)
        pattern = root.rstrip("/") + uri[len(base) :]
        infos = fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
        found = sorted(i.path for i in infos if i.type == pafs.FileType.File and fnmatch.fnmatch(i.path, pattern))
        return [(_as_uri(base, root, p),) * 2 for p in found]
    fs, path = resolve(uri)
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.Directory:
        infos = fs.get_file_info(pafs.FileSelector(path, recursive=True))
        found = sorted(i.path for i in infos if i.type == pafs.FileType.File and _is_image(i.base_name))
        return [(_as_uri(uri, path, p),) * 2 for p in found]
    if info.type == pafs.FileType.NotFound and strict:
        raise DatasetError(f"{uri}: no such file or folder")
    return [(uri, uri)]


def _expand_local(path: str, strict: bool) -> list[tuple[str, str]]:
    if _GLOB_CHARS & set(path):
        found = sorted(p for p in glob.glob(os.path.expanduser(path), recursive=True) if os.path.isfile(p))
        return [(p, str(Path(p).absolute())) for p in found]
    p = Path(path).expanduser()
    if p.is_dir():
        files = sorted(f for f in p.rglob("*") if f.is_file() and _is_image(f.name))
        return [(str(Path(path) / f.relative_to(p)), str(f.absolute())) for f in files]
    if strict and not p.exists():
        raise DatasetError(f"{path}: no such file or folder")
    return [(str(path), str(p.absolute()))]


def expand_sources(source: str | os.PathLike | Iterable[str | os.PathLike]) -> list[tuple[str, str]]:
    """(source as given, location) for every image: folders searched recursively for image files (by suffix),
    globs expanded, files and URIs as they are.  A single folder, glob or file that yields nothing is an error;
    a missing file in a list is not (it becomes an error row)."""
    items: list[str | os.PathLike]
    if isinstance(source, (str, os.PathLike)):
        single, items = True, [source]
    else:
        single, items = False, list(source)
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for item in items:
        s = os.fspath(item)
        for given, location in _expand_uri(s, single) if is_uri(s) else _expand_local(s, single):
            if given not in seen:
                seen.add(given)
                out.append((given, location))
    if not out:
        raise DatasetError(f"no image files in {source if single else ', '.join(map(str, items)) or '[]'}")
    return out


@functools.lru_cache(maxsize=16)
def _filesystem(prefix: str):
    """(filesystem, its path for ``prefix``) of ``scheme://host``: one client per bucket or host, reused."""
    return resolve(prefix)


def read_location(location: str) -> bytes:
    """The bytes at a local path or URI."""
    if location.startswith("file://"):
        location = location[len("file://") :]
    if not is_uri(location):
        with open(location, "rb") as f:
            return f.read()
    scheme, rest = location.split("://", 1)
    host, _, key = rest.partition("/")
    fs, root = _filesystem(f"{scheme}://{host}")
    with fs.open_input_stream(f"{root.rstrip('/')}/{key}") as f:
        return f.read()
