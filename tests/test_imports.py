"""Importing foveate is cheap: torch, OpenCV, onnxruntime and scikit-image load only when a name that needs them is
used, and ``foveate --help``, ``foveate info TEXTURE.fvt`` and ``foveate store ls`` never load them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import foveate

HEAVY = (
    "torch",
    "cv2",
    "onnxruntime",
    "openvino",
    "skimage",
    "rapidocr",
    "transformers",
    "sentence_transformers",
    "fastapi",
)


def _loaded_after(code: str, tmp_path) -> list[str]:
    """Run ``code`` in a fresh interpreter; the heavy modules whose code ran (a lazy placeholder does not count)."""
    probe = (
        "import json, sys\n"
        + textwrap.dedent(code)
        + (
            f"\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules"
            " and type(sys.modules[m]).__name__ != '_LazyModule']))\n"
        )
    )
    src = str(Path(foveate.__file__).resolve().parent.parent)  # this checkout's foveate, whatever the cwd
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path, timeout=300, env=env
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_import_foveate_loads_nothing_heavy(tmp_path):
    assert _loaded_after("import foveate; foveate.EncodeConfig; foveate.FoveateError", tmp_path) == []


def test_torch_loads_when_used(tmp_path):
    assert "torch" in _loaded_after("import foveate; foveate.Texture", tmp_path)
    assert "cv2" in _loaded_after(
        "import foveate.core.ops as o, numpy as np; o.to_gray(np.zeros((4, 4, 3), np.uint8))", tmp_path
    )


@pytest.mark.parametrize(
    "first",
    [
        "foveate.channels.registry",
        "foveate.query.terms",
        "foveate.query.emphasis",
        "foveate.query.semantic",
        "foveate.channels.text.group",
        "foveate.vlm.rules",
        "foveate.channels",
        "foveate.query",
    ],
)
def test_registries_are_complete_without_heavy_imports(first, tmp_path):
    """Each registry registers its built-ins where it is defined, in their order, whichever module a program imports
    first, and without loading torch, OpenCV or the models."""
    code = f"""
        import {first}
        from foveate.channels.registry import PRESETS, list_groups
        from foveate.query.terms import QUERY_TERMS
        from foveate.vlm.rules import list_rules
        assert "text" in list_groups() and "semantic" in list_groups()
        assert PRESETS["default"][-1] == "text", PRESETS["default"]
        assert list(QUERY_TERMS)[:4] == ["prompt", "text", "emphasis", "semantic"], list(QUERY_TERMS)
        assert list_rules()[:2] == ["openai", "openai-patch"] and "patch" in list_rules(), list_rules()
    """
    assert _loaded_after(code, tmp_path) == []


@pytest.mark.parametrize(
    "old,new",
    [
        ("foveate.core.channels", "foveate.channels.registry"),
        ("foveate.query.text.ocr", "foveate.channels.text.ocr"),
        ("foveate.query.text.gate", "foveate.channels.text.gate"),
        ("foveate.query.text.group", "foveate.channels.text.group"),
        ("foveate.vlm.qwen", "foveate.vlm.rules.qwen"),
        ("foveate.dist", "foveate.ray"),
        ("foveate.dist.dataset", "foveate.ray.dataset"),
    ],
)
def test_renamed_modules_import_from_their_old_path_with_a_warning(old, new, tmp_path):
    """A module moved in 0.3 is importable from its 0.2 path until 0.4: the same module object (no copy of its state),
    with a DeprecationWarning naming the new path."""
    code = f"""
        import importlib, warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            old = importlib.import_module({old!r})
        new = importlib.import_module({new!r})
        assert old is new, (old, new)
        assert any(issubclass(w.category, DeprecationWarning) and {new.split(".")[0] + "." + new.split(".")[1]!r} in
                   str(w.message) for w in caught), [str(w.message) for w in caught]
    """
    _loaded_after(code, tmp_path)


@pytest.mark.parametrize("args", [["--help"], ["store", "ls", "-s", "store"], ["info", "t.fvt"]])
def test_light_commands_load_nothing_heavy(args, tmp_path, page_texture):
    page_texture.save(tmp_path / "t.fvt")
    (tmp_path / "store").mkdir()
    from foveate.store import TextureStore

    with TextureStore(tmp_path / "store") as st:
        st.put(page_texture)
    code = f"""
        import contextlib, io
        sys.argv = ["foveate", *{args!r}]
        from foveate.cli import main
        with contextlib.redirect_stdout(io.StringIO()):
            try:
                main()
            except SystemExit as exc:
                assert not exc.code, exc.code
    """
    assert _loaded_after(code, tmp_path) == []


def test_the_package_says_the_version_its_project_file_declares():
    """``foveate.__version__`` (the service's /health, a weights file's metadata) is pyproject.toml's version."""
    import tomllib

    project = Path(foveate.__file__).resolve().parents[2] / "pyproject.toml"
    if not project.is_file():
        pytest.skip("foveate is installed from a wheel here, not run from its checkout")
    declared = tomllib.loads(project.read_text())["project"]["version"]
    assert foveate.__version__ == declared


def test_help_loads_no_numpy(tmp_path):
    """``foveate --help`` lists every VLM rule (``--vlm``'s help) from the registry without importing a rule class:
    NumPy (~60 ms of a 0.3 s start) stays unloaded."""
    code = """
        import contextlib, io
        sys.argv = ["foveate", "--help"]
        from foveate.cli import main
        with contextlib.redirect_stdout(io.StringIO()):
            try:
                main()
            except SystemExit as exc:
                assert not exc.code, exc.code
        from foveate.vlm.rules import rules_help
        assert "qwen3-vl[:MAX_PIXELS]" in rules_help() and "patch:P" in rules_help()
        assert "numpy" not in sys.modules, "numpy loaded"
    """
    _loaded_after(code, tmp_path)
