"""The texture store: round trip, keys, LRU cap against a reference model, corruption, crashes, two processes."""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
import torch

import foveate
from foveate.core.errors import StoreError
from foveate.store import DB_NAME, TextureStore, encode_into_store, expand_images

from ..conftest import random_image


def _tex(seed: int, size: int = 48, preset: str = "fast") -> foveate.Texture:
    return foveate.encode(random_image(size, size + 8, seed), preset=preset, device="cpu")


def _same(a: foveate.Texture, b: foveate.Texture) -> bool:
    return (
        a.id == b.id
        and np.array_equal(a.image, b.image)
        and a.channels == b.channels
        and all(torch.equal(x, y) for x, y in zip(a.mean + a.max, b.mean + b.max))
    )


def test_round_trip_and_idempotent_put(tmp_path):
    tex = _tex(0)
    with TextureStore(tmp_path / "s") as st:
        entry, created = st.put(tex)
        assert created and entry.id == tex.id and tex.id in st
        assert (entry.width, entry.height, entry.channels) == (56, 48, tex.channels)
        assert entry.size == len(tex.to_bytes())
        again, created2 = st.put(tex)
        assert not created2 and again.id == entry.id and st.stats()["entries"] == 1
        back = st.get(tex.id)
    assert _same(back, tex)
    # reopened by another object (as another process would): still there
    with TextureStore(tmp_path / "s") as st2:
        assert _same(st2.get(tex.id), tex)
        assert st2.get("0" * 32 + "-" + "0" * 16) is None


def test_key_includes_config_and_format_version(tmp_path):
    img = random_image(40, 40, 1)
    a = foveate.encode(img, preset="fast", device="cpu")
    b = foveate.encode(img, preset="default", device="cpu")
    assert a.content_hash == b.content_hash and a.id != b.id
    with TextureStore(tmp_path) as st:
        st.put(a)
        st.put(b)
        assert {e.preset for e in st.entries()} == {"fast", "default"}
        # an entry written by another format version is never served, and gc removes it
        conn = sqlite3.connect(st.db_path)
        conn.execute("UPDATE textures SET format_version = 0 WHERE id = ?", (a.id,))
        conn.commit()
        conn.close()
        assert st.get(a.id) is None and a.id not in st and st.entry(a.id) is None
        rep = st.gc()
        assert rep.other_versions == 1 and [e.id for e in st.entries()] == [b.id]


def test_eviction_keeps_the_cap_in_lru_order(tmp_path):
    texs = [_tex(i) for i in range(10)]
    size = len(texs[0].to_bytes())
    cap = int(3.5 * size)
    rng = random.Random(0)
    model: OrderedDict[str, int] = OrderedDict()  # reference LRU: id -> size, least recent first
    with TextureStore(tmp_path, max_bytes=cap, touch_interval=0) as st:
        for step in range(40):
            if model and rng.random() < 0.4:
                tid = rng.choice(list(model))
                assert st.get(tid) is not None
                model.move_to_end(tid)
            else:
                tex = rng.choice(texs)
                st.put(tex)
                if tex.id in model:
                    model.move_to_end(tex.id)
                else:
                    model[tex.id] = len(tex.to_bytes())
                    while sum(model.values()) > cap:
                        model.popitem(last=False)
            time.sleep(0.002)  # distinct access times
            stats = st.stats()
            assert stats["bytes"] <= cap
            assert set(st.ids()) == set(model), f"step {step}"
        assert st.counters.evictions > 0
        # lowering the cap evicts at once; a blob above the cap is refused with a clear error
        st.set_max_bytes(size + 10)
        assert st.stats()["entries"] == 1
        with pytest.raises(StoreError, match="above the store cap"):
            st.put(_tex(99, size=200))


def _flip_blob_byte_on_disk(db: Path, blob: bytes) -> None:
    """Flip one byte of ``blob`` where it lies in the database file (bypassing SQLite)."""
    raw = bytearray(db.read_bytes())
    probe = blob[len(blob) // 2 : len(blob) // 2 + 64]
    at = raw.find(probe)
    assert at > 0, "blob bytes not found in the file"
    raw[at + 10] ^= 0xFF
    db.write_bytes(bytes(raw))


def test_hand_corrupted_blob_is_detected_dropped_and_reencoded(tmp_path):
    img = random_image(64, 64, 5)
    (tmp_path / "img").mkdir()
    from PIL import Image

    Image.fromarray(img).save(tmp_path / "img" / "a.png")
    cfg = foveate.EncodeConfig(preset="fast")
    st = TextureStore(tmp_path / "s")
    first = encode_into_store(st, [tmp_path / "img" / "a.png"], cfg, workers=1)
    assert first.count("encoded") == 1
    tid = first.results[0].id
    blob = st.get_bytes(tid)
    st.close()
    conn = sqlite3.connect(tmp_path / "s" / DB_NAME)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the blob now lives in the main file
    conn.close()
    _flip_blob_byte_on_disk(tmp_path / "s" / DB_NAME, blob)

    st = TextureStore(tmp_path / "s")
    assert tid in st  # the metadata is intact ...
    assert st.get(tid) is None  # ... but the blob fails its hash: not served
    assert st.counters.corrupt == 1 and tid not in st  # and dropped
    again = encode_into_store(st, [tmp_path / "img" / "a.png"], cfg, workers=1)
    assert again.count("encoded") == 1  # re-encoded, not skipped
    assert np.array_equal(st.get(tid).image, img)
    st.close()


def test_corrupt_blob_with_valid_hash_column_edit_is_detected_by_verify(tmp_path):
    texs = [_tex(i) for i in range(3)]
    with TextureStore(tmp_path) as st:
        for t in texs:
            st.put(t)
        conn = sqlite3.connect(st.db_path)
        data = bytearray(conn.execute("SELECT data FROM textures WHERE id = ?", (texs[1].id,)).fetchone()[0])
        data[-5] ^= 0x01
        conn.execute("UPDATE textures SET data = ? WHERE id = ?", (bytes(data), texs[1].id))
        conn.commit()
        conn.close()
        assert st.verify() == [texs[1].id]
        assert sorted(st.ids()) == sorted([texs[0].id, texs[2].id])
        assert st.verify() == []


def test_bad_store_paths(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(StoreError, match="is a file"):
        TextureStore(tmp_path / "file")
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / DB_NAME).write_bytes(os.urandom(8192))
    with pytest.raises(StoreError, match="not a usable texture store"):
        TextureStore(tmp_path / "junk")
    with pytest.raises(StoreError, match="no texture store"):
        TextureStore(tmp_path / "missing", create=False)


# -- several processes ------------------------------------------------------------------------------------------


def _worker(path: str, seeds: list[int], read_seeds: list[int], out) -> None:
    """Write textures for ``seeds`` while reading whatever of ``read_seeds`` is there; report problems."""
    problems, seen = [], set()
    try:
        st = TextureStore(path, touch_interval=0)
        want = {_tex(s).id: s for s in read_seeds}
        for s in seeds:
            tex = _tex(s)
            st.put(tex)
            got = st.get(tex.id)
            if got is None or not _same(got, tex):
                problems.append(f"own texture {s} not read back")
            for tid in want:
                t = st.get(tid)
                if t is not None:
                    seen.add(tid)
                    if t.id != tid or t.content_hash != foveate.core.texture.content_hash(t.image):
                        problems.append(f"bad read of {tid}")
        st.close()
    except Exception as exc:  # reported to the parent, which fails the test
        problems.append(f"{type(exc).__name__}: {exc}")
    out.put((problems, len(seen)))


def _open_at_once(path: str, barrier, out) -> None:
    barrier.wait()
    try:
        with TextureStore(path) as st:
            out.put(("ok", len(list(st.ids()))))
    except Exception as exc:  # reported to the parent, which fails the test
        out.put((f"{type(exc).__name__}: {exc}", -1))


def test_processes_opening_a_new_store_at_once(tmp_path):
    """Switching a new database to WAL takes an exclusive lock SQLite does not wait for: every opener must retry,
    none may fail (before the fix, about one round in four failed with 'database is locked')."""
    ctx = multiprocessing.get_context("fork")  # fast to start: 20 rounds of 3 processes
    for i in range(20):
        out, barrier = ctx.Queue(), ctx.Barrier(3)
        procs = [ctx.Process(target=_open_at_once, args=(str(tmp_path / f"s{i}"), barrier, out)) for _ in range(3)]
        for p in procs:
            p.start()
        results = [out.get(timeout=60) for _ in procs]
        for p in procs:
            p.join(30)
        assert results == [("ok", 0)] * 3, (i, results)


def test_two_processes_write_and_read_the_same_store(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    a = list(range(0, 14))
    b = list(range(8, 22))  # 8..13 written by both: concurrent puts of the same key
    procs = [
        ctx.Process(target=_worker, args=(str(tmp_path), a, b, out)),
        ctx.Process(target=_worker, args=(str(tmp_path), b, a, out)),
    ]
    for p in procs:
        p.start()
    results = [out.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert [r[0] for r in results] == [[], []]
    with TextureStore(tmp_path) as st:
        assert sorted(st.ids()) == sorted({_tex(s).id for s in range(22)})
        assert st.verify() == []


_KILL_WRITER = """
import sys, hashlib, dataclasses
import numpy as np, foveate
from foveate.store import TextureStore, texture_blob
img = np.random.default_rng(0).integers(0, 256, (768, 768, 3), dtype=np.uint8)
tex = foveate.encode(img, preset="fast", device="cpu")
st = TextureStore(sys.argv[1])
blobs = []
for i in range(int(sys.argv[2])):
    t = dataclasses.replace(tex, content_hash=hashlib.sha256(f"{sys.argv[3]}-{i}".encode()).hexdigest())
    blobs.append((t, texture_blob(t)))
print("ready", flush=True)
for t, b in blobs:
    st.put(t, b)
print("done", flush=True)
"""


def test_killed_writer_leaves_no_partial_entry(tmp_path):
    """SIGKILL a process in the middle of a run of 1.7 MB puts, three times; every entry left is whole."""
    rng = random.Random(0)
    for run in range(3):
        p = subprocess.Popen(
            [sys.executable, "-c", _KILL_WRITER, str(tmp_path), "60", str(run)], stdout=subprocess.PIPE, text=True
        )
        assert p.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.05, 0.4))
        p.send_signal(signal.SIGKILL)
        p.wait(30)
    with TextureStore(tmp_path) as st:
        assert st._conn().execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        ids = list(st.ids())
        assert 0 < len(ids) < 180
        assert st.verify() == []
        for tid in ids:
            tex = st.get(tid)
            assert tex is not None and tex.image.shape == (768, 768, 3)


# -- filling a store from files ----------------------------------------------------------------------------------


def test_encode_into_store_is_resumable(tmp_path):
    from PIL import Image

    d = tmp_path / "imgs"
    (d / "sub").mkdir(parents=True)
    for i in range(3):
        Image.fromarray(random_image(40 + i, 50, i)).save(d / ("sub" if i else ".") / f"i{i}.png")
    (d / "broken.png").write_bytes(b"\x89PNG not really")
    (d / "notes.txt").write_text("not an image")
    paths = expand_images([d])
    assert [p.name for p in paths] == ["broken.png", "i0.png", "i1.png", "i2.png"]
    cfg = foveate.EncodeConfig(preset="fast")
    with TextureStore(tmp_path / "s") as st:
        first = encode_into_store(st, paths, cfg, workers=2)
        assert (first.count("encoded"), first.count("stored"), first.count("failed")) == (3, 0, 1)
        d1 = first.to_dict()  # throughput: encoded images per minute of wall time, and the median encode
        assert d1["encoded_per_min"] == pytest.approx(60.0 * 3 / first.seconds, rel=0.01)
        assert d1["encode_ms_median"] == pytest.approx(
            sorted(r.encode_ms for r in first.results if r.status == "encoded")[1], abs=0.1
        )
        second = encode_into_store(st, paths, cfg, workers=2)
        assert second.to_dict()["encoded_per_min"] == 0 and second.to_dict()["encode_ms_median"] is None
        assert (second.count("encoded"), second.count("stored"), second.count("failed")) == (0, 3, 1)
        assert "not a readable image" in second.to_dict()["failures"][str(d / "broken.png")]
        assert {r.id for r in second.results if r.id} == set(st.ids())


# -- the commands ----------------------------------------------------------------------------------------------


def test_store_commands(tmp_path):
    import json

    from PIL import Image

    from ..cli.common import run

    d = tmp_path / "imgs"
    d.mkdir()
    for i in range(3):
        Image.fromarray(random_image(40, 60, i)).save(d / f"i{i}.png")
    store = tmp_path / "store"
    r = run("encode", "--store", store, d, "--preset", "fast", "--workers", "2")
    assert r.returncode == 0, r.stderr
    assert "3 images" in r.stdout and "3 encoded" in r.stdout and "images/s" in r.stdout and "pages/min" in r.stdout
    r = run("encode", "--store", store, d, d / "i0.png", "--preset", "fast")
    assert r.returncode == 0 and "0 encoded, 3 already stored" in r.stdout
    r = run("store", "ls", "--store", store, "--json")
    entries = json.loads(r.stdout)
    assert len(entries) == 3 and {e["preset"] for e in entries} == {"fast"}
    r = run("store", "info", entries[0]["id"], "--store", store)
    assert json.loads(r.stdout)["id"] == entries[0]["id"]
    r = run("store", "info", "--store", store, "--json")
    assert json.loads(r.stdout)["entries"] == 3
    r = run("store", "gc", "--store", store, "--verify", "--max-mb", "0.001")
    assert r.returncode == 0 and "3 evicted" in r.stdout
    assert json.loads(run("store", "info", "--store", store, "--json").stdout)["entries"] == 0
    r = run("store", "clear", "--store", store, "--yes")
    assert r.returncode == 0 and "removed 0" in r.stdout
    r = run("store", "ls", "--store", tmp_path / "nowhere")
    assert r.returncode == 1 and "no texture store" in r.stderr and "Traceback" not in r.stderr
