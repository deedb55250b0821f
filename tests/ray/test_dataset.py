"""The texture dataset without a cluster: the encode worker run in this process writes real parts; the readers
(by id, all rows, into a store), resume keys, leases, repair of duplicates, damaged parts and the CLI's --ray
argument handling."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")

import foveate  # noqa: E402
from foveate.core.config import EncodeConfig  # noqa: E402
from foveate.core.errors import ConfigError, DatasetError, TextureFormatError  # noqa: E402
from foveate.core.texture import Texture, content_hash, texture_id  # noqa: E402
from foveate.ray.dataset import (  # noqa: E402
    ROW_GROUP_ROWS,
    KeySet,
    LeaseLost,
    dedupe,
    part_files,
    prepare_output,
    read_manifest,
    read_rows,
    scan,
    texture_manifest,
    write_part,
)
from foveate.ray.encode import EncodeWorker  # noqa: E402
from foveate.ray.reader import find_texture, import_into_store, iter_textures, split_ref  # noqa: E402
from foveate.ray.sources import expand_sources  # noqa: E402
from foveate.store import TextureStore  # noqa: E402

from .common import BAD, assert_one_row_per_source, assert_same_texture, corpus  # noqa: E402

FAST = EncodeConfig(preset="fast")


@pytest.fixture(autouse=True)
def _process_threads(monkeypatch):
    """A worker sets this process's OCR threads and overlap (it is meant to own its process): undone after each test."""
    for name in ("FOVEATE_OCR_THREADS", "FOVEATE_ENCODE_OVERLAP"):
        monkeypatch.setenv(name, os.environ.get(name, ""))  # recorded (set or not): restored at teardown


def _worker(out, job, done_sources=(), done_ids=(), config=FAST) -> EncodeWorker:
    return EncodeWorker(
        config.to_dict(),
        str(out),
        job,
        {"source": "source", "location": "location", "data": None},
        KeySet(done_sources),
        KeySet(done_ids),
    )


def _batch(pairs) -> pa.Table:
    return pa.table({"source": [s for s, _ in pairs], "location": [loc for _, loc in pairs]})


def _rows(out, columns=("id", "source", "texture", "texture_size", "error", "width", "height", "preset")):
    t = scan(out, columns)
    return t.to_pylist()


@pytest.fixture()
def encoded(tmp_path):
    """A dataset of the corpus written by one worker in one batch; (output, files, summary)."""
    files = corpus(tmp_path / "imgs")
    out = tmp_path / "ds"
    job = prepare_output(str(out), texture_manifest(FAST))
    summary = _worker(out, job)(_batch(expand_sources(str(tmp_path / "imgs")))).to_pylist()
    return out, files, summary


def test_rows_ids_and_textures_equal_the_local_encode(encoded):
    out, files, summary = encoded
    rows = _rows(out)
    assert_one_row_per_source(rows, files.values())
    assert {s["status"] for s in summary} == {"encoded", "failed"}
    for row in rows:
        name = os.path.basename(row["source"]).split(".")[0]
        if name in BAD:
            assert row["texture"] is None and row["error"] and row["texture_size"] is None, row
            continue
        local = foveate.encode(row["source"], FAST, device="cpu")
        assert row["error"] is None and row["id"] == local.id
        assert row["id"] == texture_id(content_hash(local.image), FAST)  # foveate's own id function
        assert (row["height"], row["width"]) == local.image_size and row["preset"] == "fast"
        assert row["texture_size"] == len(row["texture"])
        assert_same_texture(row["texture"], local)
        assert Texture.load(row).id == local.id  # a row
        assert Texture.load(row["texture"]).id == local.id  # its bytes


def test_bad_images_are_rows_that_say_why(encoded):
    out, files, _ = encoded
    errors = {os.path.basename(r["source"]).split(".")[0]: r["error"] for r in _rows(out) if r["error"]}
    assert set(errors) == set(BAD)
    assert "empty" in errors["empty"]
    assert "not a readable image" in errors["garbage"] and not errors["garbage"].startswith("<bytes>")
    assert "truncated" in errors["truncated"] or "corrupt" in errors["truncated"]
    bad = next(r for r in _rows(out) if r["error"])
    with pytest.raises(TextureFormatError, match="holds no texture"):
        Texture.load(bad)


def test_a_missing_file_in_a_list_is_an_error_row_not_a_failed_batch(tmp_path):
    out = tmp_path / "ds"
    job = prepare_output(str(out), texture_manifest(FAST))
    pairs = expand_sources([str(tmp_path / "gone.png")])
    summary = _worker(out, job)(_batch(pairs)).to_pylist()
    assert summary[0]["status"] == "failed" and "No such file" in summary[0]["error"]
    with pytest.raises(DatasetError, match="no such file"):
        expand_sources(str(tmp_path / "gone.png"))  # a single source that is not there is the caller's mistake


def test_find_texture_reads_the_right_row_of_any_row_group(tmp_path):
    imgs = tmp_path / "imgs"
    imgs.mkdir()
    from PIL import Image

    from ..conftest import random_image

    n = ROW_GROUP_ROWS * 2 + 3
    for i in range(n):
        Image.fromarray(random_image(24, 40, seed=i)).save(imgs / f"{i:02d}.png")
    out = tmp_path / "ds"
    job = prepare_output(str(out), texture_manifest(FAST))
    _worker(out, job)(_batch(expand_sources(str(imgs))))
    (part,) = part_files(str(out))
    index = scan(out, ["id", "source"]).to_pylist()
    assert len(index) == n
    for r in (0, ROW_GROUP_ROWS - 1, ROW_GROUP_ROWS, n - 1):
        tex = find_texture(out, index[r]["id"])
        assert tex.id == index[r]["id"] and tex.id == foveate.encode(index[r]["source"], FAST, device="cpu").id
    picked = read_rows(str(out), part, [n - 1, 0, ROW_GROUP_ROWS + 1], ["source"]).column("source").to_pylist()
    assert picked == [index[n - 1]["source"], index[0]["source"], index[ROW_GROUP_ROWS + 1]["source"]]
    with pytest.raises(DatasetError, match="no texture"):
        find_texture(out, "0" * 32 + "-" + "0" * 16)


def test_iter_and_import_into_a_store(encoded, tmp_path):
    out, files, _ = encoded
    got = {row["id"]: tex for row, tex in iter_textures(out)}
    assert len(got) == len(files) - len(BAD)
    with TextureStore(tmp_path / "store") as st:
        summary = import_into_store(out, st)
        assert (summary.imported, summary.stored, summary.without_texture) == (len(got), 0, len(BAD))
        assert not summary.corrupt and summary.skipped == len(BAD)
        assert import_into_store(out, st).stored == len(got)
        assert {e.source for e in st.entries()} == {os.path.basename(r["source"]) for r, _ in iter_textures(out)}
        for tid, tex in got.items():
            back = st.get(tid)
            assert back is not None and np.array_equal(back.image, tex.image)
            assert all(np.array_equal(a.numpy(), b.numpy()) for a, b in zip(back.mean, tex.mean))


def test_resume_keys_skip_sources_and_mark_duplicates(encoded, tmp_path):
    out, files, _ = encoded
    rows = _rows(out)
    before = part_files(str(out))
    job = prepare_output(str(out), texture_manifest(FAST))
    done_ids = [r["id"] for r in rows if r["texture"] is not None]
    copy = tmp_path / "copy-of-photo.jpg"
    copy.write_bytes(files["photo"].read_bytes())
    pairs = [(str(files["r0"]), str(files["r0"])), (str(copy), str(copy))]
    summary = _worker(out, job, done_sources=[r["source"] for r in rows], done_ids=done_ids)(_batch(pairs))
    assert summary.column("status").to_pylist() == ["skipped", "duplicate"]
    assert set(part_files(str(out))) - set(before)  # one new part, with the duplicate only
    dup = next(r for r in _rows(out) if r["source"] == str(copy))
    photo = next(r for r in rows if r["source"] == str(files["photo"]))
    assert dup["id"] == photo["id"] and dup["texture"] is None and dup["error"] is None
    with pytest.raises(TextureFormatError, match="duplicate"):
        Texture.load(dup)
    assert find_texture(out, dup["id"]).id == photo["id"]  # served from the row that holds it


def test_another_config_or_kind_is_refused_and_leftovers_are_removed(encoded):
    out, _, _ = encoded
    with pytest.raises(DatasetError, match="other settings"):
        prepare_output(str(out), texture_manifest(EncodeConfig(preset="default")))
    with pytest.raises(DatasetError, match="already holds textures"):
        prepare_output(str(out), {"kind": "selections", "textures": "x"})
    (out / ".part-x.parquet.abc.tmp").write_bytes(b"half a part")
    prepare_output(str(out), texture_manifest(FAST))
    assert not list(out.glob(".*.tmp"))
    assert read_manifest(str(out))["config_hash"] == FAST.hash()


def test_a_job_that_lost_the_lease_writes_nothing(tmp_path):
    out = tmp_path / "ds"
    old = prepare_output(str(out), texture_manifest(FAST))
    new = prepare_output(str(out), texture_manifest(FAST))  # a restart takes the output over
    assert old != new
    table = pa.table({"source": ["a"]})
    with pytest.raises(LeaseLost):
        write_part(str(out), table, ["a"], {"kind": "textures"}, job=old)
    assert part_files(str(out)) == [] and not list(out.glob(".*.tmp"))
    write_part(str(out), table, ["a"], {"kind": "textures"}, job=new)
    assert len(part_files(str(out))) == 1


def test_dedupe_keeps_one_row_per_source(tmp_path):
    out = tmp_path / "ds"
    prepare_output(str(out), {"kind": "selections", "textures": "t"})
    write_part(str(out), pa.table({"qid": [1, 2, 3]}), [1, 2, 3], {"kind": "selections"})
    write_part(str(out), pa.table({"qid": [3, 4]}), [3, 4], {"kind": "selections"})
    write_part(str(out), pa.table({"qid": [2]}), [2], {"kind": "selections"})
    assert dedupe(str(out), "qid") == 2
    assert sorted(scan(out, ["qid"]).column("qid").to_pylist()) == [1, 2, 3, 4]
    assert dedupe(str(out), "qid") == 0


def test_a_damaged_part_is_a_clear_error(encoded):
    out, _, _ = encoded
    part = part_files(str(out))[0]
    data = open(part, "rb").read()
    with open(part, "wb") as f:
        f.write(data[: len(data) // 2])
    with pytest.raises(DatasetError, match="not readable Parquet.*delete it"):
        scan(out, ["id"])


def test_not_a_dataset(tmp_path):
    with pytest.raises(DatasetError, match="not a foveate textures dataset"):
        find_texture(tmp_path, "x")
    (tmp_path / "_foveate.json").write_text(json.dumps({"format": "foveate-dataset", "dataset_version": 99}))
    with pytest.raises(DatasetError, match="dataset version 99"):
        find_texture(tmp_path, "x")


def test_sources_folders_globs_and_lists(tmp_path):
    files = corpus(tmp_path / "imgs")
    (tmp_path / "imgs" / "notes.txt").write_text("not an image")
    sub = tmp_path / "imgs" / "sub"
    sub.mkdir()
    (sub / "more.png").write_bytes(files["r0"].read_bytes())
    folder = expand_sources(str(tmp_path / "imgs"))
    assert [s for s, _ in folder] == [
        str(tmp_path / "imgs" / n)
        for n in (
            "empty.jpg",
            "garbage.png",
            "photo.jpg",
            "r0.png",
            "r1.png",
            "r2.png",
            "sub/more.png",
            "truncated.jpg",
        )
    ]
    assert all(os.path.isabs(loc) and loc.endswith(os.path.basename(s)) for s, loc in folder)
    assert not any(s.endswith(".txt") for s, _ in folder)
    globbed = expand_sources(str(tmp_path / "imgs" / "r*.png"))
    assert [os.path.basename(s) for s, _ in globbed] == ["r0.png", "r1.png", "r2.png"]
    uri = expand_sources(f"file://{tmp_path / 'imgs' / 'sub'}")
    assert uri == [(f"file://{sub / 'more.png'}",) * 2]
    listed = expand_sources([str(files["r1"]), str(files["r1"]), str(tmp_path / "nope.png")])
    assert [s for s, _ in listed] == [str(files["r1"]), str(tmp_path / "nope.png")]
    with pytest.raises(DatasetError, match="no image files"):
        expand_sources(str(tmp_path / "imgs" / "*.gif"))


def test_keyset_and_references(tmp_path):
    keys = [f"s3://bucket/img-{i}.jpg" for i in range(1000)]
    ks = KeySet(keys + [None])
    assert len(ks) == 1000 and all(k in ks for k in keys)
    assert "s3://bucket/img-1000.jpg" not in ks and None not in ks and "x" not in KeySet()
    (tmp_path / "ds").mkdir()
    assert split_ref(f"{tmp_path}/ds/#abc-1") is None  # no manifest: not a dataset
    (tmp_path / "ds" / "_foveate.json").write_text("{}")
    assert split_ref(f"{tmp_path}/ds/#abc-1") == (f"{tmp_path}/ds", "abc-1")
    assert split_ref(f"{tmp_path}/ds#abc-1") == (f"{tmp_path}/ds", "abc-1")
    assert split_ref("s3://b/ds/#abc") == ("s3://b/ds", "abc")
    assert split_ref(str(tmp_path / "ds")) is None and split_ref("page.png") is None


def test_ray_flag_takes_an_optional_address(tmp_path):
    from foveate.cli.ray import ray_flag_argv, split_address

    assert ray_flag_argv(["encode", "a.png", "--ray"]) == ["encode", "a.png", "--ray="]
    assert ray_flag_argv(["encode", "--ray", "imgs/", "-o", "o"]) == ["encode", "--ray=", "imgs/", "-o", "o"]
    assert ray_flag_argv(["encode", "--ray", "-o", "o", "x"]) == ["encode", "--ray=", "-o", "o", "x"]
    for address in ("auto", "ray://head:10001", "10.0.0.5:6379", "local"):
        assert ray_flag_argv(["encode", "--ray", address, "x"]) == ["encode", f"--ray={address}", "x"]
    assert ray_flag_argv(["select", "x"]) == ["select", "x"]
    assert split_address("", ["x"]) == (None, ["x"])
    assert split_address("imgs/", ["x"]) == (None, ["imgs/", "x"])
    assert split_address("auto", ["x"]) == ("auto", ["x"])


def test_encode_dataset_validates_before_any_cluster_work(tmp_path):
    from foveate.ray import encode_dataset, select_dataset

    with pytest.raises(ConfigError, match="unknown preset"):
        encode_dataset(tmp_path, tmp_path / "o", preset="nope")
    with pytest.raises(ConfigError, match="batch_size"):
        encode_dataset(tmp_path, tmp_path / "o", batch_size=0)
    with pytest.raises(ConfigError, match="vlm must be a callable"):
        select_dataset(tmp_path, [], tmp_path / "o", vlm="a plan")
    with pytest.raises(ConfigError, match="selection mode"):
        select_dataset(tmp_path, [], tmp_path / "o", mode="best")
    from foveate.core.errors import WeightsError

    with pytest.raises(WeightsError, match="no weights file"):  # a bad weights file fails before the job
        select_dataset(tmp_path, [], tmp_path / "o", weights="trained.safetensors")
    assert not (tmp_path / "o").exists()


def test_queries_tables_and_their_join_with_the_textures(encoded, tmp_path):
    import pandas as pd
    import pyarrow.parquet as pq

    from foveate.ray.select import _work, load_queries

    out, files, _ = encoded
    rows = [
        {"source": str(files["r0"]), "query": "a dog", "budget": 64},
        {"id": "nope", "query": "x"},
        {"source": str(files["garbage"]), "query": "x"},
        {"query": "no texture named"},
        {"source": str(files["photo"]), "points": [[5, 6]], "boxes": [[1, 2, 30, 40]], "mode": "topk"},
    ]
    keys = ["id", "source", "query", "budget", "points", "boxes", "mode"]
    table = pa.Table.from_pylist([{k: r.get(k) for k in keys} for r in rows])
    (tmp_path / "q.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    pq.write_table(table, tmp_path / "q.parquet")
    index = scan(out, ["id", "source", "texture_size", "error"])
    photo_id = texture_id(content_hash(foveate.load_image(files["photo"])), FAST)
    for queries in (rows, tmp_path / "q.jsonl", tmp_path / "q.parquet", table, pd.DataFrame(rows)):
        items, skipped = _work(load_queries(queries), index, {2}, 273, "quadtree")  # qid 2 done before
        got = {it["qid"]: it for it in items}
        assert skipped == 1 and sorted(got) == [0, 1, 3, 4]
        assert [q for q, it in sorted(got.items()) if it["error"] is None] == [0, 4]
        assert got[0]["budget"] == 64 and got[0]["mode"] == "quadtree"
        assert json.loads(got[0]["query"]) == {"text": "a dog"}
        assert got[4]["mode"] == "topk" and got[4]["id"] == photo_id and got[4]["part"] is not None
        assert json.loads(got[4]["query"]) == {"points": [[5, 6]], "boxes": [[1, 2, 30, 40]]}
        assert "no texture nope" in got[1]["error"] and "names no texture" in got[3]["error"]
    (tmp_path / "bad.jsonl").write_text('{"id": "a", "query": "x"}\n{not json\n')
    with pytest.raises(DatasetError, match="line 2"):
        load_queries(tmp_path / "bad.jsonl")
    with pytest.raises(ConfigError, match="query id 7 is given twice"):
        _work([{"qid": 7, "id": "a"}, {"qid": 7, "id": "b"}], index, set(), 273, "quadtree")


def test_a_dataset_at_a_uri(tmp_path):
    """Any pyarrow filesystem: here file://, through the same code as s3:// or gs://."""
    files = corpus(tmp_path / "imgs", n_random=1)
    uri = f"file://{tmp_path / 'ds'}"
    job = prepare_output(uri, texture_manifest(FAST))
    pairs = expand_sources(f"file://{tmp_path / 'imgs'}")
    assert all(s.startswith("file://") for s, _ in pairs)
    _worker(uri, job)(_batch(pairs))
    rows = scan(uri, ["id", "source", "error"]).to_pylist()
    assert len(rows) == len(files) and len(part_files(str(tmp_path / "ds"))) == 1
    photo = next(r for r in rows if r["source"].endswith("photo.jpg"))
    assert find_texture(uri, photo["id"]).id == foveate.encode(files["photo"], FAST, device="cpu").id
