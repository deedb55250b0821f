"""The store records the file a texture was encoded from (its name, never a machine path), reads entries written
before it did, finds an id by a unique prefix, and ``store ls`` prints whole ids at any width (issue 40)."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

import foveate
from foveate.core.errors import StoreError
from foveate.store import DB_NAME, TextureStore, encode_into_store, expand_images

from ..cli.common import BIN
from ..conftest import random_image

FAST = foveate.EncodeConfig(preset="fast")


def _images(folder: Path, n: int = 3) -> list[Path]:
    (folder / "sub").mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        p = folder / ("sub" if i else ".") / f"scan {i}.png"
        Image.fromarray(random_image(40, 48 + 8 * i, seed=50 + i)).save(p)
        paths.append(p)
    return paths


def _forget_sources(store: Path) -> None:
    """Make every entry look written by a foveate that recorded no source (its metadata JSON without the key)."""
    conn = sqlite3.connect(store / DB_NAME)
    conn.execute("UPDATE textures SET meta = json_remove(meta, '$.source')")
    conn.commit()
    conn.close()


def test_encode_into_store_records_the_file_name_not_the_path(tmp_path):
    paths = _images(tmp_path / "imgs")
    with TextureStore(tmp_path / "s") as st:
        summary = encode_into_store(st, expand_images([tmp_path / "imgs"]), FAST, workers=2)
        assert summary.count("encoded") == 3
        by_id = {r.id: r.path for r in summary.results}
        for e in st.entries():
            assert e.source == by_id[e.id].name and os.sep not in e.source
            assert e.to_dict()["source"] == e.source
        assert {e.source for e in st.entries()} == {p.name for p in paths}
        tex = foveate.encode(random_image(30, 30, seed=9), FAST, device="cpu")
        entry, _ = st.put(tex)  # no file behind it: no source
        assert entry.source is None and st.entry(tex.id).source is None
        entry, _ = st.put(tex, source=tmp_path / "x" / "later.png")  # already stored: the entry is unchanged
        assert entry.source is None
        other = foveate.encode(random_image(30, 31, seed=9), FAST, device="cpu")
        assert st.put(other, source="")[0].source is None  # no name to record
        uri = foveate.encode(random_image(30, 32, seed=9), FAST, device="cpu")
        assert st.put(uri, source="s3://bucket/pages/p 1.png")[0].source == "p 1.png"


def test_entries_written_without_a_source_still_read(tmp_path):
    _images(tmp_path / "imgs", n=2)
    with TextureStore(tmp_path / "s") as st:
        encode_into_store(st, expand_images([tmp_path / "imgs"]), FAST, workers=1)
    _forget_sources(tmp_path / "s")
    with TextureStore(tmp_path / "s") as st:
        entries = st.entries()
        assert len(entries) == 2 and all(e.source is None for e in entries)
        assert all(st.get(e.id) is not None for e in entries)


def test_resolve_id_by_a_unique_prefix(tmp_path):
    img = random_image(40, 40, seed=3)
    a = foveate.encode(img, FAST, device="cpu")
    b = foveate.encode(img, foveate.EncodeConfig(preset="fast", patch_size=8), device="cpu")  # same pixels
    c = foveate.encode(random_image(40, 40, seed=4), FAST, device="cpu")
    with TextureStore(tmp_path / "s") as st:
        for t in (a, b, c):
            st.put(t)
        assert st.resolve_id(a.id) == a.id
        assert st.resolve_id(a.id[:40]) == a.id  # content hash + part of the config hash
        assert st.resolve_id(c.id[:12]) == c.id
        assert st.match_ids(a.id[:20]) == sorted([a.id, b.id])
        with pytest.raises(StoreError, match="2 textures") as exc:
            st.resolve_id(a.id[:20])  # the same pixels under two configs
        assert a.id in str(exc.value) and b.id in str(exc.value)
        with pytest.raises(StoreError, match="no texture"):
            st.resolve_id("f" * 8 if not c.id.startswith("f") else "e" * 8)
        with pytest.raises(StoreError, match="give"):
            st.resolve_id("  ")
        tex = st.get(st.resolve_id(c.id[:12]))
        assert tex is not None and tex.id == c.id


def _cli() -> list[str]:
    return [str(BIN)] if BIN.exists() else [sys.executable, "-m", "foveate.cli"]


def _ls(store: Path, columns: int, *args: str) -> subprocess.CompletedProcess:
    """``foveate store ls`` with stdout a pipe, ``COLUMNS`` set as a terminal of that width would."""
    env = {**os.environ, "COLUMNS": str(columns)}
    return subprocess.run(
        [*_cli(), "store", "ls", "-s", str(store), *args], capture_output=True, text=True, env=env, timeout=120
    )


def _ls_in_a_terminal(store: Path, columns: int) -> str:
    """``foveate store ls`` in a pseudo-terminal ``columns`` wide: what it shows, without its colours."""
    import fcntl
    import pty
    import struct
    import termios

    main, sub = pty.openpty()
    fcntl.ioctl(sub, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    proc = subprocess.Popen(
        [*_cli(), "store", "ls", "-s", str(store)], stdin=subprocess.DEVNULL, stdout=sub, stderr=sub, env=env
    )
    os.close(sub)
    chunks = []
    while True:
        try:
            data = os.read(main, 1 << 16)
        except OSError:  # the other end closed
            break
        if not data:
            break
        chunks.append(data)
    os.close(main)
    assert proc.wait(timeout=120) == 0
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", b"".join(chunks).decode()).replace("\r", "")


def _shown_whole(text: str, ids: list[str], names: list[str]) -> None:
    words = text.split()
    for tid in ids:
        assert tid in words, f"id {tid} cut:\n{text}"
    for name in names:  # a name may wrap at its spaces in a narrow table, never lose a character
        assert name in text or all(w in words for w in name.split()), f"{name} cut:\n{text}"


def test_store_ls_prints_whole_ids_and_file_names_at_any_width(tmp_path):
    paths = _images(tmp_path / "imgs")
    store = tmp_path / "s"
    with TextureStore(store) as st:
        encode_into_store(st, expand_images([tmp_path / "imgs"]), FAST, workers=1)
        ids = sorted(st.ids())
    names = [p.name for p in paths]
    for columns in (200, 80, 30):  # piped: the whole table whatever COLUMNS says
        r = _ls(store, columns)
        assert r.returncode == 0, r.stderr
        _shown_whole(r.stdout, ids, names)
        assert all(line.split()[0] in ids for line in r.stdout.strip().splitlines()[1:])  # one line an entry
    if sys.platform.startswith("linux"):
        for columns in (200, 120, 80, 40):  # a terminal: the table, or two lines an entry when too narrow
            _shown_whole(_ls_in_a_terminal(store, columns), ids, names)
    doc = json.loads(_ls(store, 80, "--json").stdout)
    assert {e["source"] for e in doc} == set(names)
    _forget_sources(store)  # a store written before sources were recorded
    r = _ls(store, 80)
    assert r.returncode == 0 and not any(p.name in r.stdout for p in paths), r.stdout
    _shown_whole(r.stdout, ids, [])
