"""Run the real ``foveate`` command (the installed script, else ``python -m foveate.cli``) in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent / "foveate"


def run(*args, cwd=None):
    cmd = [str(BIN), *map(str, args)] if BIN.exists() else [sys.executable, "-m", "foveate.cli", *map(str, args)]
    return subprocess.run(
        cmd, capture_output=True, text=True, cwd=cwd, timeout=300, env={**os.environ, "COLUMNS": "200"}
    )
