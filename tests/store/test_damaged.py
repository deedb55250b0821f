"""A damaged store: a row whose metadata is not JSON, a settings value that is not a number, a dropped table, a
NaN or infinite size cap.  Each is one line (``error: ...`` or a ``warning:``), never a traceback, and loses
nothing that is still readable."""

from __future__ import annotations

import json
import math
import sqlite3
import subprocess
from pathlib import Path

import pytest
from PIL import Image

import foveate
from foveate.core.errors import StoreError
from foveate.store import DB_NAME, TextureStore, encode_into_store

from ..cli.common import run
from ..conftest import random_image

FAST = foveate.EncodeConfig(preset="fast")


def _store(tmp_path: Path, n: int = 3) -> tuple[Path, list[Path], list[str]]:
    """A store of ``n`` images encoded from files: (store folder, image paths, ids in the images' order)."""
    (tmp_path / "img").mkdir()
    paths = []
    for i in range(n):
        paths.append(tmp_path / "img" / f"p{i}.png")
        Image.fromarray(random_image(40, 48 + 8 * i, seed=70 + i)).save(paths[-1])
    with TextureStore(tmp_path / "s") as st:
        summary = encode_into_store(st, paths, FAST, workers=1)
    by_path = {r.path: r.id for r in summary.results}  # results come as each image finishes, not in order
    return tmp_path / "s", paths, [by_path[p] for p in paths]


def _sql(store: Path, *statements: str, args: tuple = ()) -> None:
    """Damage a store by hand, as another program would."""
    conn = sqlite3.connect(store / DB_NAME)
    for sql in statements:
        conn.execute(sql, args if "?" in sql else ())
    conn.commit()
    conn.close()


def _one_line_error(r: subprocess.CompletedProcess, *words: str) -> None:
    assert r.returncode == 1, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), r.stderr
    assert "Traceback" not in r.stderr and "unexpected" not in r.stderr, r.stderr
    for w in words:
        assert w in lines[0], r.stderr


# -- a row whose metadata is not JSON ----------------------------------------------------------------------------


def test_damaged_metadata_is_skipped_by_a_listing_dropped_by_a_read_and_replaced_by_a_put(tmp_path):
    store, paths, ids = _store(tmp_path)
    _sql(store, "UPDATE textures SET meta = '{bad' WHERE id = ?", args=(ids[1],))
    with TextureStore(store) as st:
        damaged: list[str] = []
        assert sorted(e.id for e in st.entries(damaged=damaged)) == sorted([ids[0], ids[2]])
        assert damaged == [ids[1]] and st.stats()["entries"] == 3  # a listing writes nothing
        assert st.entry(ids[1]) is None and st.counters.corrupt == 1  # a read drops it, as a corrupt blob
        assert st.stats()["entries"] == 2 and ids[1] not in st
    _sql(store, "UPDATE textures SET meta = '[1, 2]' WHERE id = ?", args=(ids[0],))
    tex = foveate.encode(str(paths[0]), config=FAST, device="cpu")
    with TextureStore(store) as st:
        entry, created = st.put(tex)  # no read first: the put itself replaces the damaged row
        assert created and entry.id == ids[0] and st.counters.corrupt == 1
        assert st.get(ids[0]) is not None and len(st.entries()) == 2


def test_gc_drops_rows_with_damaged_metadata(tmp_path):
    store, _, ids = _store(tmp_path)
    _sql(store, "UPDATE textures SET meta = 'null' WHERE id = ?", args=(ids[2],))
    with TextureStore(store) as st:
        rep = st.gc()
        assert rep.corrupt == 1 and sorted(st.ids()) == sorted(ids[:2])


def test_store_ls_lists_the_rest_of_a_store_with_damaged_metadata_and_encode_heals_it(tmp_path):
    store, paths, ids = _store(tmp_path)
    _sql(store, "UPDATE textures SET meta = '{bad' WHERE id = ?", args=(ids[1],))
    r = run("store", "ls", "-s", store)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert ids[0] in r.stdout and ids[2] in r.stdout and ids[1] not in r.stdout
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning: 1 texture") and ids[1] in lines[0], r.stderr
    r = run("store", "ls", "-s", store, "--json")  # the warning on stderr: stdout stays one JSON document
    assert r.returncode == 0 and sorted(e["id"] for e in json.loads(r.stdout)) == sorted([ids[0], ids[2]])
    r = run("encode", "--store", store, *paths, "--preset", "fast")  # the damaged one is encoded again
    assert r.returncode == 0 and "1 encoded, 2 already stored" in r.stdout, r.stdout + r.stderr
    r = run("store", "ls", "-s", store, "--json")
    assert r.returncode == 0 and r.stderr == "" and sorted(e["id"] for e in json.loads(r.stdout)) == sorted(ids)


# -- a settings value that is not a number -------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["abc", "-5", "1.5e9"])
def test_a_damaged_size_cap_is_one_store_error_naming_it(tmp_path, value):
    store = tmp_path / "s"
    TextureStore(store).close()
    _sql(store, "INSERT OR REPLACE INTO settings (key, value) VALUES ('max_bytes', ?)", args=(value,))
    with TextureStore(store) as st, pytest.raises(StoreError, match=f"max_bytes .*{value!r}.*--max-mb"):
        st.stats()
    with TextureStore(store, max_bytes=1 << 20) as st:  # saving a new cap repairs it
        assert st.max_bytes == 1 << 20


def test_store_info_and_gc_with_a_damaged_size_cap(tmp_path):
    store, _, _ = _store(tmp_path, n=1)
    _sql(store, "INSERT OR REPLACE INTO settings (key, value) VALUES ('max_bytes', 'abc')")
    for cmd in ("info", "gc"):
        _one_line_error(run("store", cmd, "-s", store), "max_bytes", "'abc'", str(store), "--max-mb")
    r = run("store", "gc", "-s", store, "--max-mb", "2")  # the fix the message names
    assert r.returncode == 0, r.stderr
    assert json.loads(run("store", "info", "-s", store, "--json").stdout)["max_bytes"] == 2 << 20


# -- not a foveate store: a table dropped, a column missing ------------------------------------------------------


def test_commands_on_a_store_without_its_textures_table(tmp_path):
    store, paths, _ = _store(tmp_path, n=1)
    opened = TextureStore(store)
    _sql(store, "DROP TABLE textures")
    with pytest.raises(StoreError, match="is not a foveate store or is damaged: no such table: textures"):
        list(opened.ids())  # dropped under a store already open: its next query
    opened.close()
    with pytest.raises(StoreError, match="is not a foveate store or is damaged: .*no table textures"):
        TextureStore(store)  # opened after: refused at once
    for args in (("store", "ls", "-s", store), ("store", "info", "-s", store), ("store", "gc", "-s", store)):
        _one_line_error(run(*args), str(store), "is not a foveate store or is damaged")
    _one_line_error(run("encode", paths[0], "--store", store, "--preset", "fast"), "is not a foveate store")


def test_an_sqlite_error_inside_a_method_is_a_store_error(tmp_path):
    store, _, ids = _store(tmp_path, n=1)
    _sql(store, "ALTER TABLE textures DROP COLUMN meta")
    with TextureStore(store) as st:
        for call in (st.entries, lambda: st.entry(ids[0]), lambda: ids[0] in st, st.gc):
            with pytest.raises(StoreError, match="is not a foveate store or is damaged: no such column: meta"):
                call()


# -- the size cap: NaN, infinity ----------------------------------------------------------------------------------


@pytest.mark.parametrize("cap", [math.nan, math.inf, -1.0])
def test_the_size_cap_must_be_a_finite_number_at_least_zero(tmp_path, cap):
    with pytest.raises(StoreError, match="the store size cap must be a finite number >= 0"):
        TextureStore(tmp_path / "s", max_bytes=cap)  # type: ignore[arg-type]  # a float from a setting
    with TextureStore(tmp_path / "s") as st, pytest.raises(StoreError, match="finite number >= 0"):
        st.gc(max_bytes=cap)  # type: ignore[arg-type]


def test_store_gc_refuses_a_nan_or_infinite_cap(tmp_path):
    store, _, _ = _store(tmp_path, n=1)
    for cap in ("nan", "inf", "-inf", "1e308"):
        _one_line_error(run("store", "gc", "-s", store, "--max-mb", cap), "the store size cap must be a finite number")
    assert json.loads(run("store", "info", "-s", store, "--json").stdout)["entries"] == 1  # nothing evicted
