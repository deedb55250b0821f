"""The video benchmark's functions on tiny generated inputs (the figures come from the real commands)."""

from __future__ import annotations

import math
import os

import numpy as np


def test_generated_stream_is_cheap_to_make():
    from foveate.bench.video import generated_frame

    a, b = generated_frame(0), generated_frame(1)
    assert a.shape == (480, 640, 3) and a.dtype == np.uint8 and not np.array_equal(a, b)
    assert np.array_equal(generated_frame(7), generated_frame(7))
    assert not math.isclose(float(generated_frame(0).mean()), float(generated_frame(600).mean()), abs_tol=0.5)


def test_bench_functions_run_on_generated_frames(tmp_path):
    from rich.console import Console

    from foveate.bench.video import bench_clip, bench_memory, generated_frame

    quiet = Console(file=open(os.devnull, "w"))
    res = bench_clip(
        (generated_frame(i, (128, 160), drift=False) for i in range(5)),
        thresholds=(0.0, 8.0),
        approximate=(4.0,),
        reencode_budgets=(0.2,),
        budget=30,
        console=quiet,
        label="tiny",
    )
    names = [r["session"] for r in res["sessions"]]
    assert names == ["scratch", "exact t=0", "motion t=8", "approx t=4", "motion budget=0.2"] and res["frames"] == 5
    assert res["sessions"][1]["token_agreement"] == 1.0 and res["sessions"][1]["feature_mae"] < 1e-3
    mem = bench_memory(8, size=(96, 128), console=quiet, json_path=tmp_path / "m.json")
    assert mem["samples"][-1]["frame"] == 7 and mem["samples"][-1]["memory_frames"] <= 6 + 2
