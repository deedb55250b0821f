"""What a fresh install gets: the core needs no service, Ray or ONNX exporter; a command whose extra is missing says
which one to install, in one line; ``foveate prepare`` sets a machine up once."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import foveate

from .common import run

#: a sitecustomize-like prelude: the listed top-level packages cannot be imported, as on a core install
BLOCK = """
import importlib.abc, sys
class _Missing(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, _Missing())
"""


def _without(blocked: set[str], code: str) -> subprocess.CompletedProcess[str]:
    src = str(Path(foveate.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]), "COLUMNS": "200"}
    prelude = BLOCK.format(blocked=blocked)
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)], capture_output=True, text=True, timeout=300, env=env
    )


def test_the_core_install_pulls_no_service_ray_or_exporter():
    requires = importlib.metadata.requires("foveate") or []
    core = [r.split(";")[0].strip().lower() for r in requires if "extra ==" not in r]
    names = {r.split("<")[0].split(">")[0].split("=")[0].split("[")[0].strip() for r in core}
    assert names and not names & {
        "fastapi",
        "uvicorn",
        "ray",
        "python-multipart",
        "prometheus-client",
        "httpx",
        "onnx",
        "onnxscript",
    }, names
    extras = {r.split("extra ==")[1].strip().strip("'\"") for r in requires if "extra ==" in r}
    assert {"serve", "ray", "onnx", "plots", "train", "bench", "dev"} <= extras


@pytest.mark.parametrize("argv", [["serve"], ["bench-serve"]])
def test_a_command_without_its_extra_says_which_to_install(argv, tmp_path):
    done = _without(
        {"fastapi", "uvicorn"},
        f"""
        import sys
        sys.argv = ["foveate", *{argv!r}]
        from foveate.cli import main
        main()
    """,
    )
    assert done.returncode == 1, done.stderr
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "pip install 'foveate[serve]'" in lines[0] and "Traceback" not in done.stderr, lines


def test_importing_the_service_without_its_extra_is_an_import_error_that_says_why():
    done = _without(
        {"fastapi"},
        """
        try:
            import foveate.service
        except ImportError as exc:
            from foveate.core.errors import MissingExtraError
            assert isinstance(exc, MissingExtraError), type(exc)
            print(exc)
    """,
    )
    assert done.returncode == 0, done.stderr
    assert "foveate[serve]" in done.stdout


def test_encode_select_and_prompt_work_on_a_core_install(tmp_path):
    """Without the extras' packages the main job runs: encode, select and a request body (questions on torch)."""
    done = _without(
        {"fastapi", "uvicorn", "ray", "pyarrow", "onnx", "onnxscript", "matplotlib", "httpx"},
        f"""
        import os
        os.environ["FOVEATE_CACHE"] = {str(tmp_path / "cache")!r}
        import foveate
        from foveate.bench.common import EXAMPLES
        from foveate.vlm import build_request
        tex = foveate.encode(EXAMPLES / "page.png", device="cpu")
        sel = foveate.select(tex, "What is the total due?", 144)
        req = build_request(tex.image, sel, "anthropic")
        assert 0 < len(sel) <= 144 and req.plan.tokens <= req.plan.image.tokens
        print("ok")
    """,
    )
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-2000:]


@pytest.mark.slow
def test_prepare_exports_the_question_encoder_once_and_the_int8_recogniser_on_request(tmp_path, monkeypatch):
    env_cache = tmp_path / "cache"
    monkeypatch.setenv("FOVEATE_CACHE", str(env_cache))
    first = run("prepare", "--json")
    second = run("prepare", "--int8", "--json")
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    a, b = json.loads(first.stdout)["question_encoder"], json.loads(second.stdout)["question_encoder"]
    assert a["status"] == "exported" and b["status"] == "ready" and a["folder"] == b["folder"]
    assert a["max_abs_diff"] <= 1e-5 and Path(a["folder"], "verified.json").is_file()
    assert Path(a["folder"]).is_relative_to(env_cache)
    assert "int8_recogniser" not in json.loads(first.stdout)  # only on request
    int8 = json.loads(second.stdout)["int8_recogniser"]
    assert int8["status"] == "made" and Path(int8["path"]).is_relative_to(env_cache) and Path(int8["path"]).is_file()
