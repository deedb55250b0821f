"""Video benchmarks (``foveate bench-video``; the figures in BENCHMARKS.md come from these):

* :func:`bench_clip` -- per-frame cost of the incremental path against encoding every frame from scratch, both
  sessions fed the same frames in the same run (interleaved, so machine load hits both alike), plus how close the
  incremental texture and selection stay to the from-scratch ones.
* :func:`bench_memory` -- resident memory over a long generated stream (add_frame + select per frame).

    foveate bench-video ../shared/data/sam2_bedroom_video/frames --json out/video-bench.json
    foveate bench-video --stream 2000
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from rich.console import Console
from rich.table import Table

from ..core.config import EncodeConfig, SelectConfig
from ..core.device import resolve_device
from ..core.texture import encode_array
from ..video import Frame, FrameReader, VideoPredictor, token_overlap
from .common import machine_info, write_json


def _summary(ts: list[float]) -> dict[str, float]:
    if not ts:
        return {"mean": float("nan"), "median": float("nan"), "p90": float("nan"), "n": 0}
    return {
        "mean": statistics.fmean(ts),
        "median": statistics.median(ts),
        "p90": float(np.percentile(ts, 90)),
        "n": len(ts),
    }


def _features(state) -> np.ndarray:
    """Level-0 mean texture without the temporal channels (those follow each session's own selections)."""
    tex = state.texture
    keep = [i for i, c in enumerate(tex.channels) if c not in ("prev_relevance", "prev_saliency", "fixations")]
    return tex.mean[0][..., keep].float().cpu().numpy()


def bench_clip(
    source: str | Path | Iterable[np.ndarray],
    *,
    preset: str = "fast",
    thresholds: tuple[float, ...] = (0.0, 8.0),
    approximate: tuple[float, ...] = (),
    reencode_budgets: tuple[float, ...] = (),
    max_frames: int | None = 200,
    budget: int = 273,
    mode: str = "quadtree",
    device: str = "cpu",
    label: str | None = None,
    console: Console | None = None,
    json_path: Path | None = None,
) -> dict[str, Any]:
    """Incremental (one session per change threshold) vs from-scratch (``incremental=False``) on one clip: a video
    file, a folder of frames, or any iterable of (H, W, 3) uint8 frames (e.g. :func:`generated_frame`).

    A threshold of 0 is the exact update (the texture equals the frame's own encode), any other the default
    motion-compensated update (``VideoConfig.update="auto"``); the session names say which.  ``approximate`` adds,
    per threshold, an exact-update session that re-encodes only the changed tiles whatever they cost
    (``update="exact", refresh_neighbours=False, full_frame_share=1``): not exact, it shows what skipping work buys
    and costs without motion compensation; ``reencode_budgets`` adds motion-compensated sessions (default threshold)
    with those ``reencode_budget`` values."""
    from scipy import sparse  # noqa: F401  (a one-time import the first motion step would otherwise pay mid-run)

    console = console or Console()
    dev = resolve_device(device)
    predictor = VideoPredictor(
        EncodeConfig(preset=preset), select_config=SelectConfig(budget=budget, mode=mode), device=dev
    )
    states = {"scratch": predictor.init_state(incremental=False)}
    for t in thresholds:
        state = predictor.init_state(change_threshold=t)
        states[f"{'motion' if state.config.motion_compensated else 'exact'} t={t:g}"] = state
    states.update(
        {
            f"approx t={t:g}": predictor.init_state(
                change_threshold=t, update="exact", refresh_neighbours=False, full_frame_share=1.0
            )
            for t in approximate
        }
    )
    states.update(
        {f"motion budget={b:g}": predictor.init_state(update="motion", reencode_budget=b) for b in reencode_budgets}
    )
    names = list(states)
    add_ms: dict[str, list[float]] = defaultdict(list)
    cpu_ms: dict[str, list[float]] = defaultdict(list)  # process CPU time (all threads) of add_frame
    sel_ms: dict[str, list[float]] = defaultdict(list)
    changed, reenc, agree, mae = (defaultdict(list) for _ in range(4))
    steps: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    plain: list[float] = []
    keyframes: dict[str, int] = defaultdict(int)
    reader: FrameReader | None = None
    frames: Iterable[Frame] | Iterable[np.ndarray]
    if isinstance(source, (str, Path)):
        frames = reader = FrameReader(source)
    else:
        frames = source
    label = label or str(source)
    n = 0
    for item in frames:
        if max_frames is not None and n >= max_frames:
            break
        frame = item.image if hasattr(item, "image") else item
        sels = {}
        for name in names:
            cpu0 = time.process_time()
            st = predictor.add_frame(states[name], frame)
            cpu = (time.process_time() - cpu0) * 1000.0
            sel = predictor.select(states[name], None)
            if n > 0:  # the first frame pays one-time imports
                add_ms[name].append(st.timings_ms["total"])
                cpu_ms[name].append(cpu)
                sel_ms[name].append(sel.timings_ms["total"])
                for k, v in st.timings_ms.items():
                    steps[name][k].append(v)
            changed[name].append(st.changed_share)
            reenc[name].append(st.reencoded_share)
            keyframes[name] += st.keyframe
            sels[name] = sel
        t0 = time.perf_counter()
        encode_array(frame, predictor.config, dev)  # the core encode alone, for reference
        if n > 0:
            plain.append((time.perf_counter() - t0) * 1000.0)
        ref = _features(states["scratch"])
        for name in names[1:]:
            agree[name].append(token_overlap(sels["scratch"], sels[name]))
            mae[name].append(float(np.abs(_features(states[name]) - ref).mean()))
        n += 1
    if reader is not None:
        reader.close()
    h, w = states["scratch"].texture.image_size
    scratch_mean = _summary(add_ms["scratch"])["mean"]
    scratch_cpu = statistics.fmean(cpu_ms["scratch"])
    rows: list[dict[str, Any]] = []
    for name in names:
        s = _summary(add_ms[name])
        cpu = statistics.fmean(cpu_ms[name])
        rows.append(
            {
                "session": name,
                "add_frame_ms": s,
                "select_ms": _summary(sel_ms[name]),
                "speedup_mean": scratch_mean / s["mean"] if s["mean"] > 0 else float("nan"),
                "add_frame_cpu_ms_mean": cpu,
                "speedup_cpu": scratch_cpu / cpu if cpu > 0 else float("nan"),
                "changed_share": float(np.mean(changed[name])),
                "reencoded_share": float(np.mean(reenc[name])),
                "keyframes": keyframes[name],
                "token_agreement": float(np.mean(agree[name])) if agree[name] else 1.0,
                "feature_mae": float(np.mean(mae[name])) if mae[name] else 0.0,
                "steps_ms_mean": {k: statistics.fmean(v) for k, v in steps[name].items() if k != "total"},
            }
        )
    result = {
        "source": label,
        "frames": n,
        "size": [w, h],
        "preset": preset,
        "budget": budget,
        "mode": mode,
        "opencv_threads": cv2.getNumThreads(),
        "encode_array_ms": _summary(plain),
        "sessions": rows,
        "machine": machine_info(dev),
        "video_config": dict(vars(predictor.video).items()),
    }
    table = Table(
        "session",
        "add_frame ms mean",
        "median",
        "p90",
        "x cheaper (mean)",
        "CPU ms mean",
        "x cheaper (CPU)",
        "changed",
        "re-encoded",
        "keyframes",
        "tokens as scratch",
        "feature MAE",
        box=None,
    )
    for r in rows:
        a = r["add_frame_ms"]
        table.add_row(
            r["session"],
            f"{a['mean']:.2f}",
            f"{a['median']:.2f}",
            f"{a['p90']:.2f}",
            f"{r['speedup_mean']:.2f}",
            f"{r['add_frame_cpu_ms_mean']:.2f}",
            f"{r['speedup_cpu']:.2f}",
            f"{100 * r['changed_share']:.1f}%",
            f"{100 * r['reencoded_share']:.1f}%",
            str(r["keyframes"]),
            f"{100 * r['token_agreement']:.1f}%",
            f"{r['feature_mae']:.4f}",
        )
    console.print(
        f"[bold]{label}[/]: {n} frames {w}x{h}, preset {preset}, select {mode} {budget} tokens "
        f"(query-blind); plain encode_array {_summary(plain)['mean']:.2f} ms/frame",
        highlight=False,
    )
    console.print(table)
    keys = ["change", "flow", "memory", "warp", "plan", "local", "global", "mips", "texture"]
    detail = Table("session", *[f"{k} ms" for k in keys], box=None)
    for r in rows:
        detail.add_row(r["session"], *[f"{r['steps_ms_mean'].get(k, 0.0):.2f}" for k in keys])
    console.print("mean ms per add_frame step (local = all channels when a frame is encoded from scratch):")
    console.print(detail)
    write_json(result, json_path)
    return result


def _rss_bytes() -> int:
    """Current resident set size (Linux /proc; elsewhere the peak from getrusage)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import resource

        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def generated_frame(i: int, size: tuple[int, int] = (480, 640), seed: int = 0, drift: bool = True) -> np.ndarray:
    """Frame ``i`` of an endless generated clip from a static camera: a textured background, three moving boxes,
    (``drift``) a slow global brightness change, and a new background every 500 frames (a scene cut).
    (H, W, 3) uint8, computed on demand."""
    h, w = size
    rng = np.random.default_rng(seed + i // 500)
    base = rng.integers(0, 256, (h // 8 + 1, w // 8 + 1, 3), dtype=np.uint8)
    img = np.repeat(np.repeat(base, 8, axis=0), 8, axis=1)[:h, :w].astype(np.int16)
    if drift:
        img += int(10 * math.sin(i / 40.0))
    for k, color in enumerate(((230, 40, 40), (40, 200, 60), (30, 60, 220))):
        y = int((h - 80) * (0.5 + 0.45 * math.sin(i / (25.0 + 10 * k) + k)))
        x = int((w - 100) * (0.5 + 0.45 * math.cos(i / (35.0 + 7 * k) + 2 * k)))
        img[y : y + 80, x : x + 100] = color
    return np.clip(img, 0, 255).astype(np.uint8)


def bench_memory(
    frames: int = 2000,
    *,
    size: tuple[int, int] = (480, 640),
    preset: str = "fast",
    device: str = "cpu",
    console: Console | None = None,
    json_path: Path | None = None,
) -> dict[str, Any]:
    """Resident memory while ``frames`` generated frames stream through one session (add_frame + select)."""
    console = console or Console()
    predictor = VideoPredictor(EncodeConfig(preset=preset), device=device)
    state = predictor.init_state()
    samples = []
    t0 = time.perf_counter()
    start_at = min(50, frames - 1)  # after warm-up: imports, allocator pools, the first keyframes
    for i in range(frames):
        predictor.add_frame(state, generated_frame(i, size))
        predictor.select(state, None, 273)
        if i == start_at or (i + 1) % 250 == 0 or i == frames - 1:
            samples.append({"frame": i, "rss_mib": _rss_bytes() / 2**20, "memory_frames": len(state.memory_frames)})
    elapsed = time.perf_counter() - t0
    start, end = samples[0], samples[-1]
    result = {
        "frames": frames,
        "size": [size[1], size[0]],
        "preset": preset,
        "samples": samples,
        "rss_start_mib": start["rss_mib"],
        "rss_end_mib": end["rss_mib"],
        "rss_growth_mib": end["rss_mib"] - start["rss_mib"],
        "seconds": elapsed,
        "machine": machine_info(resolve_device(device)),
    }
    table = Table("frame", "RSS MiB", "frames in memory", box=None)
    for s in samples:
        table.add_row(str(s["frame"]), f"{s['rss_mib']:.1f}", str(s["memory_frames"]))
    console.print(
        f"[bold]generated stream[/]: {frames} frames {size[1]}x{size[0]}, preset {preset}, {elapsed:.1f} s",
        highlight=False,
    )
    console.print(table)
    console.print(
        f"RSS {start['rss_mib']:.1f} MiB at frame {start['frame']} -> {end['rss_mib']:.1f} MiB at frame "
        f"{end['frame']} ({end['rss_mib'] - start['rss_mib']:+.1f} MiB)",
        highlight=False,
    )
    write_json(result, json_path)
    return result
