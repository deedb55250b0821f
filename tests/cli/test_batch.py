"""``select`` and ``encode -o`` over folders and globs: one output folder per image, a summary, a bad file skipped
and listed; one layout (``q01-<query>/``) for one query or several."""

from __future__ import annotations

import json

import numpy as np
from PIL import Image

from .common import run


def _pictures(folder, n: int) -> list[str]:
    """``n`` small generated pictures (blocks of colour, each different), as PNG and JPEG files."""
    folder.mkdir(parents=True, exist_ok=True)
    names = []
    for i in range(n):
        rng = np.random.default_rng(i)
        small = rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)
        img = Image.fromarray(small).resize((160, 120), Image.NEAREST)
        name = f"pic{i:02d}.{'png' if i % 2 else 'jpg'}"
        img.save(folder / name)
        names.append(name)
    return names


def test_select_over_a_folder_writes_a_folder_per_image_and_a_summary(tmp_path):
    names = _pictures(tmp_path / "in", 10)
    (tmp_path / "in" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really")  # a bad file among them
    (tmp_path / "in" / "notes.txt").write_text("not an image: not an input")
    r = run("select", tmp_path / "in", "--point", "80,60", "-b", "24", "--preset", "fast", "-o", tmp_path / "out")
    assert r.returncode == 1 and "Traceback" not in r.stderr  # it finished, and says one input failed
    assert "broken.png" in r.stderr and "1 of 11 inputs failed" in r.stderr
    assert "10 selected, 1 failed" in " ".join(r.stdout.split())
    folders = sorted(p.name for p in (tmp_path / "out").iterdir() if p.is_dir())
    assert folders == sorted(n.rsplit(".", 1)[0] for n in names)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert (summary["inputs"], summary["selected"], summary["failed"]) == (11, 10, 1)
    bad = [row for row in summary["results"] if row["status"] == "failed"]
    assert len(bad) == 1 and bad[0]["input"].endswith("broken.png") and "not a readable image" in bad[0]["error"]
    for row in summary["results"]:
        if row["status"] != "ok":
            continue
        (q,) = row["queries"]
        doc = json.loads((tmp_path / "out" / q["folder"] / "selection.json").read_text())
        assert q["folder"] == f"{row['folder']}/q01-prompt" and doc["num_tokens"] == q["tokens"] <= 24
        assert q["bytes"] == sum(doc["files"].values()) > 0


def test_select_over_a_glob_with_json_and_one_layout_for_any_number_of_queries(tmp_path):
    _pictures(tmp_path / "in", 3)
    r = run("select", str(tmp_path / "in" / "*.png"), "-q", "red", "-q", "blue", "-b", "24", "--preset", "fast",
            "--json", "--format", "jpeg", "-o", tmp_path / "out")  # fmt: skip
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["inputs"] == 1 and summary["results"][0]["folder"] == "pic01"  # the one PNG of the three
    assert sorted(p.name for p in (tmp_path / "out" / "pic01").iterdir()) == ["q01-red", "q02-blue"]
    assert (tmp_path / "out" / "pic01" / "q01-red" / "overlay.jpg").exists()
    one = run("select", tmp_path / "in" / "pic00.jpg", "-q", "red", "-b", "24", "--preset", "fast",
              "-o", tmp_path / "one")  # fmt: skip
    assert one.returncode == 0, one.stderr
    assert sorted(p.name for p in (tmp_path / "one").iterdir()) == ["q01-red"]  # one query: the same layout


def test_select_refuses_an_empty_folder_and_a_glob_matching_nothing(tmp_path):
    (tmp_path / "empty").mkdir()
    for arg, needle in ((tmp_path / "empty", "no image files"), (tmp_path / "none-*.png", "no file matches")):
        r = run("select", arg, "-o", tmp_path / "o")
        assert r.returncode == 1 and needle in r.stderr and "Traceback" not in r.stderr
    r = run("select", "example:page", "--format", "gif", "-o", tmp_path / "o")
    assert r.returncode == 1 and "--format takes png, jpeg, webp" in r.stderr


def test_encode_a_folder_into_an_output_folder(tmp_path):
    _pictures(tmp_path / "in", 3)
    (tmp_path / "in" / "broken.jpg").write_bytes(b"\xff\xd8 not a jpeg")
    r = run("encode", tmp_path / "in", "--preset", "fast", "-o", tmp_path / "tex")
    assert r.returncode == 1 and "broken.jpg" in r.stderr and "Traceback" not in r.stderr
    assert "4 images: 3 encoded, 1 failed" in " ".join(r.stdout.split())
    assert sorted(p.name for p in (tmp_path / "tex").iterdir()) == ["pic00.fvt", "pic01.fvt", "pic02.fvt"]
