"""Bad input on the command line gets one line and exit code 1, never a traceback (issue 40's audit of the surfaces
added in 0.2): the prompt command's weights and question, rule specs, undecodable bytes, presets for saved textures,
textures read from a store, and error lines that stay one line on a pipe."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys

import pytest

import foveate
from foveate.cli import video as video_cli
from foveate.video.config import VideoConfig

from .common import BIN, run


def _one_error_line(done: subprocess.CompletedProcess[str], needle: str) -> None:
    assert done.returncode == 1, (done.returncode, done.stderr[-2000:])
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], lines
    assert "Traceback" not in done.stderr


@pytest.fixture(scope="module")
def page_fvt(tmp_path_factory, page_texture):
    path = tmp_path_factory.mktemp("fvt") / "page.fvt"
    page_texture.save(path)
    return path


def test_prompt_reads_the_weights_it_is_given(page_fvt, page_texture, tmp_path):
    """``foveate prompt --weights`` plans what ``select(..., weights=...)`` then ``build_request`` plan (it had no
    ``--weights``: every prompt used the default weights)."""
    from foveate.vlm import build_request

    q = "When was it signed?"
    done = run("prompt", page_fvt, "-q", q, "--weights", "handset", "--json", "-o", tmp_path / "p")
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    want = build_request(page_texture.image, foveate.select(page_texture, q, weights="handset"), "openai", q)
    default = build_request(page_texture.image, foveate.select(page_texture, q), "openai", q)
    assert [p["box"] for p in got["pictures"]] == [list(p.box) for p in want.plan.pictures]
    assert got["plan_tokens"] == want.plan.tokens
    sel_h, sel_d = foveate.select(page_texture, q, weights="handset"), foveate.select(page_texture, q)
    assert sel_h.boxes.tolist() != sel_d.boxes.tolist() or want.plan.tokens != default.plan.tokens


def test_prompt_refuses_an_empty_question(page_fvt, tmp_path):
    _one_error_line(run("prompt", page_fvt, "-q", "  ", "-o", tmp_path / "p"), "question")


@pytest.mark.parametrize(
    "spec",
    [
        "patch:999999999999999999999999",
        "patch:0",
        "qwen2-vl:99999999999999999999",
        "anthropic:x",
        "nosuchrule",
        "x" * 300,
    ],
)
def test_a_bad_rule_spec_is_one_line(spec, page_fvt, tmp_path):
    _one_error_line(run("prompt", page_fvt, "-q", "total", "--vlm", spec, "-o", tmp_path / "p"), "")


@pytest.mark.parametrize("command", ["select", "prompt"])
def test_undecodable_bytes_in_a_question_are_read_not_a_crash(command, page_fvt, tmp_path):
    """A question holding bytes that are not UTF-8 (a shell's ``$'tot\\xffal'``) is read with U+FFFD in their place;
    it was a ``TypeError`` from the tokenizer."""
    args = [
        os.fsencode(str(BIN)) if BIN.exists() else sys.executable.encode(),
        *([] if BIN.exists() else [b"-m", b"foveate.cli"]),
        command.encode(),
        os.fsencode(str(page_fvt)),
        b"-q",
        b"tot\xffal due",
        b"-o",
        os.fsencode(str(tmp_path / command)),
    ]
    done = subprocess.run(args, capture_output=True, timeout=300, env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]


def test_the_library_reads_lone_surrogates(page_texture):
    for text in ("tot\udcffal", "a\ud800b", "\udfff"):
        sel = foveate.select(page_texture, text, 64)
        assert 0 < len(sel) <= 64 and "\ufffd" in sel.query.text or "?" in sel.query.text


def test_an_unknown_preset_is_an_error_for_a_saved_texture_too(page_fvt, tmp_path):
    """``--preset bogus`` was silently ignored when the source was a .fvt (no encode reads it)."""
    _one_error_line(run("select", page_fvt, "-q", "total", "--preset", "bogus", "-o", tmp_path / "s"), "bogus")


def test_select_reads_a_stored_texture_by_id_or_prefix(page_texture, tmp_path):
    from foveate.store import TextureStore

    with TextureStore(tmp_path / "store") as st:
        st.put(page_texture)
    for ref in (page_texture.id, page_texture.id[:10]):
        done = run("select", f"{tmp_path / 'store'}/#{ref}", "-q", "total", "--json", "-o", tmp_path / "sel")
        assert done.returncode == 0, done.stderr
        doc = json.loads(done.stdout)
        assert (doc[0] if isinstance(doc, list) else doc)["texture_id"] == page_texture.id
    _one_error_line(run("select", f"{tmp_path / 'store'}/#ffff0000", "-q", "total", "-o", tmp_path / "x"), "no texture")


def test_a_long_error_stays_one_line_on_a_pipe(tmp_path):
    """Rich wrapped error lines at 80 columns when stderr was piped."""
    missing = tmp_path / ("a-very-long-folder-name-" * 6) / "page.png"
    done = subprocess.run(
        [str(BIN), "select", str(missing), "-q", "total"]
        if BIN.exists()
        else [sys.executable, "-m", "foveate.cli", "select", str(missing), "-q", "total"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "80"},
    )
    _one_error_line(done, "page.png")


def test_video_keyframe_interval_has_one_default():
    """The command line said 30, ``VideoConfig`` 60."""
    default = inspect.signature(video_cli.video).parameters["keyframe_interval"].default.default
    assert default == VideoConfig.keyframe_interval == VideoConfig().keyframe_interval


def test_the_int8_recogniser_unmade_is_one_line_not_a_silent_float(tmp_path, monkeypatch, page_path):
    """``--recogniser int8`` on a machine where ``foveate prepare --int8`` was not run: one line naming the command
    that makes it, and no texture written (never one read by the float model under the int8 config)."""
    monkeypatch.setenv("FOVEATE_CACHE", str(tmp_path / "cache"))
    done = run("encode", page_path, "--recogniser", "int8", "-o", tmp_path / "p.fvt")
    _one_error_line(done, "foveate prepare --int8")
    assert not (tmp_path / "p.fvt").exists()


def test_an_unexpected_error_is_one_line_and_foveate_debug_shows_the_traceback(monkeypatch, capsys, page_fvt):
    """A failure no message was written for (here a bug planted in ``info``) still prints one line, exit 1;
    ``FOVEATE_DEBUG=1`` lets it raise."""
    from foveate import cli
    from foveate.cli import encode as encode_cli

    def planted(*_args, **_kwargs):
        raise RuntimeError("planted bug")

    monkeypatch.setattr(encode_cli, "_describe", planted)
    monkeypatch.setattr(sys, "argv", ["foveate", "info", str(page_fvt)])
    monkeypatch.delenv("FOVEATE_DEBUG", raising=False)
    with pytest.raises(SystemExit) as done:
        cli.main()
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert done.value.code == 1 and len(lines) == 1, lines
    assert lines[0].startswith("error: unexpected RuntimeError: planted bug") and "FOVEATE_DEBUG" in lines[0]
    monkeypatch.setenv("FOVEATE_DEBUG", "1")
    with pytest.raises(RuntimeError, match="planted bug"):
        cli.main()


def test_a_damaged_texture_is_one_line_and_a_folder_run_skips_it(tmp_path, page_fvt):
    """A texture whose config is null printed an AttributeError traceback, and stopped a folder's run at it."""
    data = page_fvt.read_bytes()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + n])
    meta = json.loads(header["__metadata__"]["foveate"])
    meta["config"] = None
    header["__metadata__"]["foveate"] = json.dumps(meta)
    blob = json.dumps(header).encode()
    blob += b" " * (-len(blob) % 8)
    folder = tmp_path / "batch"
    folder.mkdir()
    (folder / "a.fvt").write_bytes(len(blob).to_bytes(8, "little") + blob + data[8 + n :])
    (folder / "b.fvt").write_bytes(data)
    _one_error_line(run("info", folder / "a.fvt"), "damaged texture file")
    done = run("select", folder, "-q", "total", "-b", 64, "-o", tmp_path / "out")
    assert "Traceback" not in done.stderr and "a.fvt" in done.stdout + done.stderr
    assert (tmp_path / "out" / "b").is_dir() and not (tmp_path / "out" / "a").exists()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("encode", "IMG", "-o", ""), "-o/--output"),
        (("encode", "IMG", "--store", "ST", "--workers", "-1"), "--workers"),
    ],
)
def test_an_empty_output_name_or_negative_workers_is_a_usage_error(tmp_path, page_path, args, needle):
    given = [str(page_path) if a == "IMG" else str(tmp_path / "st") if a == "ST" else a for a in args]
    done = run(*given)
    assert done.returncode == 2 and "Traceback" not in done.stderr and needle in done.stderr, done.stderr[-2000:]


def test_a_count_of_documents_that_would_fill_the_disk_is_refused_before_drawing(tmp_path):
    """``synth:99999999999`` started writing pages (395 MB in two minutes); now one line, nothing written."""
    _one_error_line(run("synth", tmp_path / "s", "-n", 99999999999), "must be in [1, 10000]")
    done = run("train", "synth:99999999999", "-o", tmp_path / "w.safetensors", "--cache", tmp_path / "cache")
    _one_error_line(done, "must be in [1, 10000]")
    assert not (tmp_path / "s").exists() and not list((tmp_path / "cache").glob("synth-*/images/*"))


def test_eval_refuses_nan_settings_in_one_line(tmp_path):
    folder = tmp_path / "set"
    (folder / "images").mkdir(parents=True)
    (folder / "queries.jsonl").write_text("")
    _one_error_line(run("eval", folder, "--min-px", "nan", "-o", tmp_path / "o"), "min_px must be a finite number")


def test_document_options_are_checked_and_refused_on_one_image(tmp_path):
    """``--page 0`` said "page -1 is outside ... (0-based)", ``--dpi 0`` quietly meant the default, and ``--page`` on
    one image was ignored; an encode option's error named ``--ocr / --recogniser`` whatever it was about."""
    for flag, value in (("--page", "0"), ("--max-pages", "0"), ("--dpi", "nan"), ("--dpi", "0")):
        done = run("prompt", "example:page", "-q", "total", flag, value, "-o", tmp_path / "o")
        assert done.returncode == 2 and flag in done.stderr and "Traceback" not in done.stderr, done.stderr
    _one_error_line(run("prompt", "example:page", "-q", "total", "--page", "2", "-o", tmp_path / "o"), "one image")
    done = run("encode", "example:page", "--patch-size", "0", "-o", tmp_path / "p.fvt")
    assert done.returncode == 2 and "--patch-size" in done.stderr and "--ocr" not in done.stderr, done.stderr


def test_a_folder_named_as_the_output_file_is_one_line(tmp_path):
    (tmp_path / "d.fvt").mkdir()
    _one_error_line(run("encode", "example:page", "-p", "fast", "-o", tmp_path / "d.fvt"), "is a folder")


def test_store_clear_without_anyone_to_ask_says_pass_yes(tmp_path):
    """With stdin not a terminal the confirmation read EOF and the command said "interrupted" (exit 130)."""
    assert run("encode", "example:page", "-p", "fast", "--store", tmp_path / "st").returncode == 0
    cmd = [str(BIN), "store", "clear", "--store", str(tmp_path / "st")]
    done = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
    _one_error_line(done, "pass --yes")
    assert len(json.loads(run("store", "ls", "--store", tmp_path / "st", "--json").stdout)) == 1  # nothing removed


def test_info_on_a_texture_cut_short_says_so(tmp_path, page_fvt):
    """``info`` reads the header only, which reads fine from a file cut in half: it printed a full table."""
    data = page_fvt.read_bytes()
    (tmp_path / "half.fvt").write_bytes(data[: len(data) // 2])
    _one_error_line(run("info", tmp_path / "half.fvt"), "truncated texture file")
