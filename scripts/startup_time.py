"""Start-up time of the command line and of ``import foveate``: wall time of fresh interpreters, median of ``-n`` runs.

    python scripts/startup_time.py [-n 15]

Times ``python -c "import foveate"``, ``python -c "import foveate; foveate.Texture"`` (the first use that needs
torch), ``foveate --help``, ``foveate store ls`` and ``foveate info`` on a small saved texture, each in a new
process, and lists the heavy modules the two imports loaded (``tests/test_imports.py`` checks the commands).  Backs
the figures in BENCHMARKS.md ("OCR only where there is text, and a light import").
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEAVY = ("torch", "cv2", "onnxruntime", "skimage", "rapidocr", "transformers")


def _timed(cmd: list[str], env: dict, cwd: str, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        out.append(time.perf_counter() - t0)
    return out


def _loaded(code: str, env: dict, cwd: str) -> list[str]:
    probe = (
        code + f"\nimport json, sys\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules and "
        "type(sys.modules[m]).__name__ != '_LazyModule']))"
    )
    run = subprocess.run([sys.executable, "-c", probe], env=env, cwd=cwd, capture_output=True, text=True, check=True)
    return json.loads(run.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=15, help="runs per command (median reported)")
    args = ap.parse_args()
    src = str(Path(__file__).resolve().parent.parent / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    with tempfile.TemporaryDirectory() as tmp:
        for where in (["-o", "t.fvt"], ["--store", "store"]):
            subprocess.run(
                [sys.executable, "-m", "foveate.cli", "encode", "example:photo", "--preset", "fast", *where],
                env=env,
                cwd=tmp,
                check=True,
                capture_output=True,
            )
        cli = shutil.which("foveate", path=str(Path(sys.executable).parent))
        cli_cmd = [cli] if cli else [sys.executable, "-m", "foveate.cli"]
        cases = [
            ("python -c 'import foveate'", [sys.executable, "-c", "import foveate"], "import foveate"),
            (
                "python -c 'import foveate; foveate.Texture'",
                [sys.executable, "-c", "import foveate; foveate.Texture"],
                "import foveate; foveate.Texture",
            ),
            ("foveate --help", cli_cmd + ["--help"], None),
            ("foveate store ls", cli_cmd + ["store", "ls", "-s", "store"], None),
            ("foveate info t.fvt", cli_cmd + ["info", "t.fvt"], None),
        ]
        print(f"{'command':48s} {'median s':>9s} {'min s':>7s}  heavy modules loaded")
        for label, cmd, code in cases:
            ts = _timed(cmd, env, tmp, args.n)
            heavy = _loaded(code, env, tmp) if code else "-"
            print(f"{label:48s} {statistics.median(ts):9.3f} {min(ts):7.3f}  {heavy}")


if __name__ == "__main__":
    main()
