"""encode_dataset / select_dataset on a real local Ray cluster (2 CPUs): the same ids and textures as the local
encode, bit for bit; bad images as rows; resume; a Ray Dataset as input; a job killed mid-run and restarted
loses and duplicates nothing; selections equal the local select; the command line."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

ray = pytest.importorskip("ray")

import foveate  # noqa: E402
from foveate.core.config import EncodeConfig  # noqa: E402
from foveate.core.io import load_image  # noqa: E402
from foveate.core.texture import Texture, content_hash, texture_id  # noqa: E402
from foveate.ray import encode_dataset, find_texture, select_dataset  # noqa: E402
from foveate.ray.dataset import part_files, scan  # noqa: E402
from foveate.render.crops import plan_crops  # noqa: E402

from ..cli.common import run  # noqa: E402
from ..conftest import EXAMPLES, random_image  # noqa: E402
from .common import BAD, assert_one_row_per_source, assert_same_texture, corpus  # noqa: E402

pytestmark = pytest.mark.slow
FAST = EncodeConfig(preset="fast")
ROWS = ("id", "source", "texture", "texture_size", "error", "width", "height", "preset", "encode_ms")


@pytest.fixture(scope="module")
def cluster():
    """A local Ray cluster of 2 CPUs for this module; yields its address (for subprocess drivers)."""
    ray.init(num_cpus=2, logging_level="ERROR", log_to_driver=False)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def default_ds(cluster, tmp_path_factory):
    """The corpus (bundled photo and page, random images, bad files) encoded with the default preset (OCR and
    MiniLM on every worker)."""
    base = tmp_path_factory.mktemp("default")
    files = corpus(base / "imgs", n_random=2)
    files["page"] = base / "imgs" / "page.png"
    shutil.copy(EXAMPLES / "page.png", files["page"])
    summary = encode_dataset(base / "imgs", base / "ds", preset="default", concurrency=1, batch_size=2, progress=False)
    return base / "ds", files, summary


def _rows(out, columns=ROWS) -> list[dict]:
    return scan(out, columns).to_pylist()


def test_ids_and_textures_equal_the_local_encode_bit_for_bit(default_ds):
    out, files, summary = default_ds
    assert summary.count("encoded") == len(files) - len(BAD) and summary.count("failed") == len(BAD)
    rows = _rows(out)
    assert_one_row_per_source(rows, files.values())
    config = EncodeConfig(preset="default")
    for row in rows:
        if os.path.basename(row["source"]).split(".")[0] in BAD:
            assert row["texture"] is None and row["error"] and row["source"] in summary.failures
            continue
        local = foveate.encode(row["source"], config, device="cpu")
        assert row["id"] == local.id == texture_id(content_hash(local.image), config)
        assert_same_texture(row["texture"], local)  # OCR lines and MiniLM embeddings included
    page = next(r for r in rows if r["source"].endswith("page.png"))
    assert Texture.load(page).extras["text"]["lines"], "the workers ran OCR"


def test_select_dataset_equals_the_local_select(default_ds, tmp_path):
    out, files, _ = default_ds
    rows = {os.path.basename(r["source"]): r for r in _rows(out)}
    page, photo = rows["page.png"], rows["photo.jpg"]
    queries = [
        {"source": page["source"], "query": "What is the total due?"},
        {"id": photo["id"], "query": None, "points": [[250, 180]], "budget": 64, "mode": "topk"},
        {"id": page["id"], "query": {"text": "signed", "boxes": [[10, 10, 200, 200]]}},
        {"source": str(files["garbage"]), "query": "anything"},
        {"source": "never-encoded.png", "query": "anything"},
        {"id": photo["id"], "points": [[99999, 5]]},
    ]
    seen = []
    summary = select_dataset(
        out,
        queries,
        tmp_path / "sel",
        concurrency=1,
        progress=False,
        vlm=lambda tex, sel: {"texture": tex.id, "tokens": len(sel)},
    )
    assert summary.count("selected") == 3 and summary.count("failed") == 3
    got = {
        r["qid"]: r
        for r in _rows(
            tmp_path / "sel",
            ("qid", "id", "source", "query", "budget", "mode", "num_tokens", "selection", "vlm", "error"),
        )
    }
    assert sorted(got) == list(range(len(queries)))
    for qid in (0, 1, 2):
        r = got[qid]
        tex = find_texture(out, r["id"])
        sel = foveate.select(tex, json.loads(r["query"]), budget=r["budget"], mode=r["mode"])
        local = sel.to_dict()
        local["crops"] = plan_crops(sel).to_dict()
        doc = json.loads(r["selection"])
        for d in (doc, local):
            d.pop("timings_ms")
            d["crops"].pop("timings_ms")  # the planner's own time
        assert doc == local and r["num_tokens"] == len(sel) <= r["budget"]
        assert json.loads(r["vlm"]) == {"texture": tex.id, "tokens": len(sel)}
        seen.append(r["source"])
    assert seen[1] == photo["source"]  # a query by id gets its source
    assert "could not be encoded" in got[3]["error"] and "no image" in got[4]["error"]
    assert "outside" in got[5]["error"] and got[5]["selection"] is None
    again = select_dataset(out, queries, tmp_path / "sel", progress=False)
    assert again.count("skipped") == len(queries) and again.count("selected") == 0


def test_resume_skips_done_rows_and_marks_duplicates(cluster, tmp_path):
    files = corpus(tmp_path / "imgs", n_random=3)
    first = encode_dataset(tmp_path / "imgs", tmp_path / "ds", preset="fast", batch_size=2, progress=False)
    assert first.count("encoded") == len(files) - len(BAD)
    parts = {p: os.stat(p).st_mtime_ns for p in part_files(str(tmp_path / "ds"))}
    again = encode_dataset(tmp_path / "imgs", tmp_path / "ds", preset="fast", batch_size=2, progress=False)
    assert again.counts == {"skipped": len(files)}  # nothing read, nothing encoded
    new = tmp_path / "imgs" / "new.png"
    from PIL import Image

    Image.fromarray(random_image(64, 80, seed=7)).save(new)
    shutil.copy(files["photo"], tmp_path / "imgs" / "photo-copy.jpg")
    third = encode_dataset(tmp_path / "imgs", tmp_path / "ds", preset="fast", batch_size=2, progress=False)
    assert (third.count("encoded"), third.count("duplicate"), third.count("skipped")) == (1, 1, len(files))
    assert all(os.stat(p).st_mtime_ns == t for p, t in parts.items())  # earlier parts untouched
    rows = _rows(tmp_path / "ds")
    assert_one_row_per_source(rows, [*files.values(), new, tmp_path / "imgs" / "photo-copy.jpg"])
    copy = next(r for r in rows if r["source"].endswith("photo-copy.jpg"))
    assert copy["texture"] is None and copy["id"] == foveate.encode(files["photo"], FAST, device="cpu").id


def test_a_ray_dataset_of_image_bytes_or_paths(cluster, tmp_path):
    files = corpus(tmp_path / "imgs", n_random=2)
    ds = ray.data.read_binary_files(str(tmp_path / "imgs"), include_paths=True)
    summary = encode_dataset(ds, tmp_path / "ds", preset="fast", batch_size=3, progress=False)
    assert summary.count("encoded") == len(files) - len(BAD) and summary.count("failed") == len(BAD)
    rows = _rows(tmp_path / "ds")
    assert_one_row_per_source(rows, files.values())
    for row in rows:
        if row["texture"] is not None:
            assert_same_texture(row["texture"], foveate.encode(row["source"], FAST, device="cpu"))
    paths = ray.data.from_items([{"path": str(p)} for p in files.values()])
    by_path = encode_dataset(paths, tmp_path / "ds2", preset="fast", batch_size=3, progress=False)
    assert by_path.count("encoded") == len(files) - len(BAD)
    assert sorted((r["source"], r["id"]) for r in _rows(tmp_path / "ds2")) == sorted(
        (r["source"], r["id"]) for r in rows
    )


_DRIVER = textwrap.dedent("""
    import sys, ray
    ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
    from foveate.ray import encode_dataset
    encode_dataset(sys.argv[2], sys.argv[3], preset="fast", concurrency=2, batch_size=1, progress=False)
""")


def _wait_for_other_jobs_to_die(timeout: float = 60.0) -> None:
    """Block until no (non-detached) actor of another job is alive. A killed driver's actors live on for a moment
    on the cluster and may still write the batch they hold; what "survived" the kill is only known once they are
    gone. (The GCS actor table, read without the dashboard this test cluster does not run.)"""
    from ray._private import state

    mine = ray.get_runtime_context().get_job_id()
    deadline = time.time() + timeout
    while time.time() < deadline:
        alive = [
            a
            for a in state.actors().values()
            if a["State"] != "DEAD" and a["JobID"] != mine and not a.get("IsDetached")  # Ray Data's own helpers
        ]
        if not alive:
            return
        time.sleep(0.1)
    raise AssertionError(f"{len(alive)} actors of the killed job still alive after {timeout:.0f} s")


def _wait_for_parts_to_settle(out, quiet: float = 2.0, timeout: float = 60.0) -> None:
    """Block until no part file has appeared in ``out`` for ``quiet`` seconds: a write task of the killed job (not an
    actor, so not seen by :func:`_wait_for_other_jobs_to_die`) may still land its part after its actors are gone."""
    deadline = time.time() + timeout
    last, since = -1, time.time()
    while time.time() < deadline:
        now = len(part_files(str(out)))
        if now != last:
            last, since = now, time.time()
        elif time.time() - since >= quiet:
            return
        time.sleep(0.1)
    raise AssertionError(f"parts still appearing in {out} after {timeout:.0f} s")


def test_a_killed_job_restarted_loses_and_duplicates_nothing(cluster, tmp_path):
    from PIL import Image

    imgs = tmp_path / "imgs"
    imgs.mkdir()
    n = 24
    for i in range(n):  # big enough (~60 ms each) that the kill lands mid-run
        Image.fromarray(random_image(768, 1024, seed=1000 + i)).save(imgs / f"{i:02d}.jpg", quality=90)
    expected = {
        str(imgs / f"{i:02d}.jpg"): texture_id(content_hash(load_image(imgs / f"{i:02d}.jpg")), FAST) for i in range(n)
    }
    out = tmp_path / "ds"
    script = tmp_path / "driver.py"
    script.write_text(_DRIVER)
    child = subprocess.Popen(
        [sys.executable, str(script), cluster, str(imgs), str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.time() + 120
        while (not out.is_dir() or len(part_files(str(out))) < 2) and time.time() < deadline and child.poll() is None:
            time.sleep(0.005)
        seen = len(part_files(str(out))) if out.is_dir() else 0
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
    assert 2 <= seen < n, f"the kill did not land mid-run ({seen} of {n} parts written)"
    _wait_for_other_jobs_to_die()
    _wait_for_parts_to_settle(out)
    survived = _rows(out, ("id", "source"))
    assert seen <= len(survived) < n  # what was written stays; the batches in flight are lost
    restart = encode_dataset(imgs, out, preset="fast", concurrency=2, batch_size=1, progress=False)
    assert restart.count("skipped") == len(survived)
    rows = _rows(out, ("id", "source", "texture_size", "error"))
    assert len(rows) == n and {r["source"]: r["id"] for r in rows} == expected  # none lost, none twice
    assert all(r["texture_size"] and r["error"] is None for r in rows)
    assert restart.count("encoded") + restart.deduplicated == n - len(survived)
    assert not list(out.glob(".*.tmp"))


def test_command_line(cluster, tmp_path):
    out = tmp_path / "ds"
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"not a png")
    r = run("encode", "--ray", cluster, "example:photo", str(EXAMPLES / "page.png"), bad, "--preset", "fast", "-o", out)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "2 encoded, 0 already in" in " ".join(r.stdout.split()) and "1 failed" in " ".join(r.stdout.split())
    assert f"failed {bad}: not a readable image" in r.stderr
    assert r.stderr.strip().splitlines()[-1] == "error: 1 of 3 images could not be encoded (their rows say why)"
    rows = _rows(out, ("id", "source"))
    assert len(rows) == 3
    photo = next(x for x in rows if x["source"].endswith("photo.jpg"))
    assert photo["id"] == foveate.encode(EXAMPLES / "photo.jpg", FAST, device="cpu").id
    r = run("select", f"{out}/#{photo['id']}", "--point", "250,180", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["texture_id"] == photo["id"]
    r = run("store", "import", out, "-s", tmp_path / "store")
    assert r.returncode == 0 and "imported 2 textures" in r.stdout and "1 row without" in r.stdout, r.stderr
    r = run("select", f"{out}/#{'0' * 8}", "-q", "x")
    assert r.returncode == 1 and r.stderr.startswith("error: no texture") and "Traceback" not in r.stderr
    r = run("encode", "--ray", cluster, "--store", tmp_path / "s", "example:photo")
    assert r.returncode == 1 and "either --store DIR or --ray" in r.stderr
