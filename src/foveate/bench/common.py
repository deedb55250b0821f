"""What every benchmark shares: the bundled example images, the machine a figure was measured on (with the
git commit), and writing results as JSON."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from pathlib import Path

import cv2
import torch

from ..core.device import describe

#: the bundled example images (``example:page`` / ``example:photo``)
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def machine_info(device: torch.device) -> dict:
    try:
        commit = (
            subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"],
                capture_output=True,
                text=True,
                cwd=Path(__file__).parent,
                timeout=5,
            ).stdout.strip()
            or None
        )
    except (OSError, subprocess.SubprocessError):
        commit = None
    return {
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "opencv": cv2.__version__,
        "device": describe(device),
        "commit": commit,
    }


def write_json(result: dict, json_path: Path | None) -> None:
    """Write ``result`` as indented JSON to ``json_path`` (its folder created), when one is given."""
    if json_path is not None:
        json_path = Path(json_path)
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(result, indent=2, default=float))
