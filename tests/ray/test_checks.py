"""What a texture-dataset job refuses, without a cluster (issue 40): a bad output or input is refused before Ray
starts (library and command line); a malformed manifest or part is one ``DatasetError`` line; ``store import``
records a corrupt row and goes on."""

from __future__ import annotations

import os
import shutil

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from foveate.core.config import EncodeConfig  # noqa: E402
from foveate.core.errors import ConfigError, DatasetError  # noqa: E402
from foveate.ray.dataset import MANIFEST, part_files, prepare_output, scan, texture_manifest  # noqa: E402
from foveate.ray.reader import import_into_store  # noqa: E402
from foveate.store import TextureStore  # noqa: E402

from ..cli.common import run  # noqa: E402
from ..conftest import EXAMPLES  # noqa: E402
from .common import BAD, corpus, write_dataset  # noqa: E402

FAST = EncodeConfig(preset="fast")
#: a cluster address nothing answers at: a command that reached Ray would fail on it, not on its output
NO_CLUSTER = "127.0.0.1:1"


@pytest.fixture(autouse=True)
def _process_threads(monkeypatch):
    """A worker sets this process's OCR threads and overlap (it is meant to own its process): undone after each test."""
    for name in ("FOVEATE_OCR_THREADS", "FOVEATE_ENCODE_OVERLAP"):
        monkeypatch.setenv(name, os.environ.get(name, ""))


@pytest.fixture()
def dataset(tmp_path):
    """(dataset folder, its rows without texture bytes) of the corpus: 4 textures and 3 failed rows, one part."""
    corpus(tmp_path / "imgs", n_random=3, size=48)
    out = tmp_path / "ds"
    write_dataset(tmp_path / "imgs", out)
    return out, scan(out, ["id", "source", "texture_size", "error"]).to_pylist()


def _one_line(exc: BaseException) -> str:
    msg = str(exc)
    assert msg and "\n" not in msg, f"not one line: {msg!r}"
    return msg


# -- item 7: a bad output (or input) is refused before Ray starts ----------------------------------------------------


def test_a_bad_output_is_refused_before_ray_starts(tmp_path, monkeypatch):
    import foveate.ray.encode as encode_mod
    from foveate.ray import encode_dataset

    def no_ray(*args, **kwargs):
        raise AssertionError("Ray was started")

    monkeypatch.setattr(encode_mod, "connect", no_ray)
    files = corpus(tmp_path / "imgs", n_random=1, size=32)
    afile = tmp_path / "afile"
    afile.write_text("not a folder")
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    for bad, why in (
        ("", "empty path"),
        ("   ", "empty path"),
        (afile, "is a file"),
        (afile / "sub", "is a file"),
        (f"file://{afile}", "is a file"),
    ):
        with pytest.raises(DatasetError, match=why) as exc:
            encode_dataset(files["r0"], bad, preset="fast")
        _one_line(exc.value)
        with pytest.raises(DatasetError, match=why):
            prepare_output(str(bad), texture_manifest(FAST))  # the library refuses too
    assert os.listdir(work) == [], "nothing is written into the current folder"
    # an output written with other settings, a missing input, a bad worker count: all before Ray
    prepare_output(str(tmp_path / "other"), texture_manifest(EncodeConfig(preset="fast", patch_size=32)))
    with pytest.raises(DatasetError, match="other settings"):
        encode_dataset(files["r0"], tmp_path / "other", preset="fast")
    with pytest.raises(DatasetError, match="no such file"):
        encode_dataset(tmp_path / "nowhere", tmp_path / "o", preset="fast")
    with pytest.raises(DatasetError, match="no image files"):
        encode_dataset(work, tmp_path / "o", preset="fast")
    for bad_workers in (0, (0, 2), (3, 2)):
        with pytest.raises(ConfigError, match="concurrency"):
            encode_dataset(files["r0"], tmp_path / "o", preset="fast", concurrency=bad_workers)
    assert not (tmp_path / "o").exists()


def test_an_unwritable_output_is_refused_before_ray_starts(tmp_path, monkeypatch):
    import foveate.ray.encode as encode_mod
    from foveate.ray import encode_dataset

    monkeypatch.setattr(encode_mod, "connect", lambda *a, **k: pytest.fail("Ray was started"))
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # root writes anywhere: let the check see what a user would
        real = os.access
        monkeypatch.setattr(os, "access", lambda p, mode: False if str(p) == str(locked) else real(p, mode))
    try:
        with pytest.raises(DatasetError, match="not writable"):
            encode_dataset(EXAMPLES / "photo.jpg", locked / "ds", preset="fast")
        with pytest.raises(DatasetError, match="not writable"):
            encode_dataset(EXAMPLES / "photo.jpg", locked, preset="fast")
        assert os.listdir(locked) == []
    finally:
        locked.chmod(0o700)


def test_encode_ray_command_refuses_a_bad_output_at_once(tmp_path):
    """``--ray`` at an address nothing answers at: the command must fail on the output, never reach Ray."""
    afile = tmp_path / "afile"
    afile.write_text("not a folder")
    for output, why in (("", "empty path"), (afile, "is a file"), (afile / "sub", "is a file")):
        r = run("encode", "--ray", NO_CLUSTER, EXAMPLES / "photo.jpg", "-o", output, "--preset", "fast", cwd=tmp_path)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 1 and len(lines) == 1 and lines[0].startswith("error: ") and why in lines[0], r.stderr
    r = run("encode", "--ray", NO_CLUSTER, tmp_path / "nowhere", "-o", tmp_path / "ds", "--preset", "fast")
    assert r.returncode == 1 and r.stderr.strip().splitlines() == [
        f"error: {tmp_path / 'nowhere'}: no such file or folder"
    ]
    assert sorted(os.listdir(tmp_path)) == ["afile"]


# -- item 8: a malformed manifest or part is one DatasetError line; a corrupt row is recorded ------------------------


@pytest.mark.parametrize("doc", ["[]", "1", '"textures"', "null", "{}", "{not json", '{"format": "foveate-dataset"}'])
def test_a_malformed_manifest_is_one_dataset_error_line(dataset, tmp_path, doc):
    out, _ = dataset
    (out / MANIFEST).write_text(doc)
    with TextureStore(tmp_path / "store") as st:
        with pytest.raises(DatasetError) as exc:
            import_into_store(out, st)
        assert _one_line(exc.value).startswith(str(out))
        assert st.stats()["entries"] == 0


def _rewrite_part(out, change) -> str:
    """Apply ``change`` to the (only) part's table and write it back, its Parquet metadata kept."""
    (part,) = part_files(str(out))
    table = pq.read_table(part)
    pq.write_table(change(table), part)
    return part


@pytest.mark.parametrize(
    "change, why",
    [
        (lambda t: t.drop_columns(["texture"]), "no column texture"),
        (lambda t: t.drop_columns(["id"]), "no column id"),
        (lambda t: t.set_column(t.schema.get_field_index("texture"), "texture", pa.array(["x"] * len(t))), "texture"),
        (lambda t: t.set_column(t.schema.get_field_index("id"), "id", pa.array(range(len(t)))), "id"),
    ],
    ids=["no-texture", "no-id", "texture-as-text", "id-as-number"],
)
def test_a_malformed_part_is_one_dataset_error_line(dataset, tmp_path, change, why):
    out, _ = dataset
    part = _rewrite_part(out, change)
    with TextureStore(tmp_path / "store") as st:
        with pytest.raises(DatasetError, match=why) as exc:
            import_into_store(out, st)
        assert os.path.basename(part) in _one_line(exc.value)
        assert st.stats()["entries"] == 0, "a malformed part is found before anything is imported"


def test_a_part_that_is_not_parquet_is_one_dataset_error_line(dataset, tmp_path):
    out, _ = dataset
    (part,) = part_files(str(out))
    for data in (b"", b"PAR1 not really parquet PAR1"):
        with open(part, "wb") as f:
            f.write(data)
        with TextureStore(tmp_path / "store") as st, pytest.raises(DatasetError, match="not readable Parquet") as exc:
            import_into_store(out, st)
        _one_line(exc.value)


def _corrupt_two_rows(out, rows) -> tuple[str, str, str]:
    """Damage one texture's bytes and give another row a wrong id; returns (the damaged row's id, the wrong id,
    the relabelled row's true id)."""
    with_texture = [i for i, r in enumerate(rows) if r["texture_size"]]
    damaged, relabelled = with_texture[0], with_texture[1]
    wrong_id = "0" * 32 + "-" + "0" * 16

    def change(t):
        tex = t.column("texture").to_pylist()
        tex[damaged] = tex[damaged][:100] + b"garbage" + tex[damaged][107:]
        ids = t.column("id").to_pylist()
        ids[relabelled] = wrong_id
        t = t.set_column(t.schema.get_field_index("texture"), "texture", pa.array(tex, pa.binary()))
        return t.set_column(t.schema.get_field_index("id"), "id", pa.array(ids, pa.string()))

    _rewrite_part(out, change)
    return rows[damaged]["id"], wrong_id, rows[relabelled]["id"]


def test_import_records_a_corrupt_row_and_goes_on(dataset, tmp_path):
    out, rows = dataset
    damaged, relabelled, true_id = _corrupt_two_rows(out, rows)
    good = {r["id"] for r in rows if r["texture_size"]} - {damaged, true_id}
    with TextureStore(tmp_path / "store") as st:
        summary = import_into_store(out, st)
        assert summary.imported == 2 and summary.stored == 0 and summary.without_texture == len(BAD)
        assert summary.skipped == len(BAD) and set(summary.corrupt) == {damaged, relabelled}
        assert all(summary.corrupt[i] and "\n" not in summary.corrupt[i] for i in summary.corrupt)
        assert "holds the texture of" in summary.corrupt[relabelled]
        assert summary.to_dict()["corrupt"] == 2 and list(summary.to_dict()["corrupt_rows"]) == sorted(summary.corrupt)
        assert set(st.ids()) == good and len(good) == 2
        again = import_into_store(out, st)  # a rerun: the good ones are stored, the corrupt ones still listed
        assert (again.imported, again.stored, len(again.corrupt)) == (0, 2, 2)


def test_store_import_command_says_imported_skipped_corrupt(dataset, tmp_path):
    out, rows = dataset
    clean = tmp_path / "clean"
    shutil.copytree(out, clean)
    r = run("store", "import", clean, "-s", tmp_path / "s1")
    text = " ".join(r.stdout.split())
    assert r.returncode == 0 and "imported 4 textures" in text and "skipped 3" in text and "0 corrupt" in text, r
    damaged, relabelled, _ = _corrupt_two_rows(out, rows)
    r = run("store", "import", out, "-s", tmp_path / "s2")
    text = " ".join(r.stdout.split())
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "imported 2 textures" in text and "skipped 3" in text and "2 corrupt" in text, r.stdout
    assert damaged in r.stderr and relabelled in r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("error: 2 corrupt rows")
    (out / MANIFEST).write_text("[]")
    r = run("store", "import", out, "-s", tmp_path / "s3")
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 1 and len(lines) == 1 and lines[0].startswith(f"error: {out}"), r.stderr
