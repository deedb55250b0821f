"""``foveate video``: stream a video through a session and write its selections, statistics and overlay."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from .._tables import print_table
from ..core.config import DEFAULT_BUDGET, SelectConfig
from ..core.errors import ConfigError, FoveateError
from ..video.config import VideoConfig
from .common import DeviceOpt, LevelsOpt, MaxPixOpt, PatchOpt, _encode_config, _prompt_query, app, err, out


@app.command()
def video(
    source: Path = typer.Argument(..., help="A video file (mp4, webm, ... via OpenCV/FFmpeg) or a folder of frames."),
    query: str | None = typer.Option(None, "--query", "-q", help="Query text, applied to every frame."),
    point: list[str] = typer.Option([], "--point", help="Positive point prompt 'x,y' on the first frame; repeatable."),
    neg_point: list[str] = typer.Option([], "--neg-point", help="Negative point prompt 'x,y'; repeatable."),
    box: list[str] = typer.Option([], "--box", help="Box prompt 'x0,y0,x1,y1' on the first frame; repeatable."),
    prompt_all_frames: bool = typer.Option(
        False, "--prompt-all-frames", help="Apply points/boxes to every frame, not only the first."
    ),
    budget: int = typer.Option(DEFAULT_BUDGET, "--budget", "-b", help="Tokens to select per frame."),
    mode: str = typer.Option("quadtree", "--mode", "-m", help="quadtree or topk."),
    gist: bool = typer.Option(True, "--gist/--no-gist", help="topk: add the whole image at the coarsest level."),
    output: Path = typer.Option(Path("out/video"), "--output", "-o", help="Output folder."),
    threshold: float | None = typer.Option(
        None,
        "--threshold",
        "-t",
        help="Re-encode a tile when its change exceeds this many grey levels: 0 = the exact "
        "update (any change; the texture is exactly the frame's encode); otherwise the motion-compensated update, "
        "the residual after moving the features with the camera (default 8).",
    ),
    reencode_budget: float = typer.Option(
        0.05,
        "--reencode-budget",
        help="Motion-compensated update: at most this share of the frame's pixels "
        "is re-encoded per frame (more: closer to a from-scratch encode, "
        "slower).",
    ),
    memory: int = typer.Option(6, "--memory", help="Recent frames in the temporal memory."),
    keyframe_interval: int = typer.Option(
        VideoConfig.keyframe_interval, "--keyframe-interval", help="A full refresh every N frames."
    ),
    stability: float = typer.Option(
        0.0, "--stability", help="Keep last frame's tokens unless a new one beats them by this score margin."
    ),
    full: bool = typer.Option(False, "--full", help="Encode every frame from scratch (no incremental updates)."),
    overlay: bool = typer.Option(
        True,
        "--overlay/--no-overlay",
        help="Write overlay.mp4 (--no-overlay also removes an earlier run's from the output folder).",
    ),
    max_frames: int | None = typer.Option(None, "--max-frames", help="Stop after this many frames."),
    fps: float | None = typer.Option(
        None, "--fps", help="Overlay frame rate, more than 0 and at most 1000 (default: the video's, else 24)."
    ),
    preset: str = typer.Option("fast", "--preset", "-p", help="Channel preset: fast, default or full."),
    patch_size: int = PatchOpt,
    max_levels: int = LevelsOpt,
    max_pixels: int = MaxPixOpt,
    device: str = DeviceOpt,
    weights: str = typer.Option(
        "handset",
        "--weights",
        help="Relevance weights: handset (the default for video: "
        "the trained ones were fitted on still images), "
        "default (the trained weights), or a weights file.",
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the run's summary as JSON instead of a table."),
) -> None:
    """Stream a video through a bounded temporal memory: re-encode only what changed, select tokens per frame.
    Writes selections.jsonl, stats.jsonl and overlay.mp4."""
    import os
    import warnings

    from ..video import FrameSkippedWarning, VideoPredictor, run_video

    _check_fps(fps)  # a usage error before any work (a bad rate used to fail late, hang or blame the encoder)
    cfg = SelectConfig(budget=budget, mode=mode, gist=gist)
    if max_frames is not None and max_frames < 1:
        raise FoveateError("--max-frames must be at least 1")
    q = _prompt_query(query, point, neg_point, box)
    vcfg = VideoConfig(
        change_threshold=threshold,
        reencode_budget=reencode_budget,
        memory=memory,
        keyframe_interval=keyframe_interval,
        stability=stability,
        incremental=not full,
    )
    predictor = VideoPredictor(
        _encode_config(preset, patch_size, max_levels, max_pixels), vcfg, cfg, device=device, weights=weights
    )

    def show(message, category, filename, lineno, file=None, line=None):
        err.print(f"warning: {message}", highlight=False, markup=False)

    warnings.showwarning = show
    warnings.simplefilter("always", FrameSkippedWarning)
    os.environ.setdefault("OPENCV_FFMPEG_LOGLEVEL", "-8")  # FFmpeg's own log lines; we report skipped frames ourselves
    progress = err.status("encoding frame 0 ...") if err.is_terminal else None
    if progress is not None:
        progress.start()
    try:
        summary = run_video(
            source,
            q,
            output,
            predictor=predictor,
            prompt_frames="all" if prompt_all_frames else "first",
            overlay=overlay,
            max_frames=max_frames,
            fps=fps,
            on_frame=(lambda r: progress.update(f"encoding frame {r.index + 1} ...")) if progress else None,
        )
    finally:
        if progress is not None:
            progress.stop()
    for note in summary.notes:
        err.print(f"note: {note}", highlight=False)
    if json_out:
        out.print_json(json.dumps(summary.to_dict()))
        return
    header = [
        "frames",
        "skipped",
        "keyframes",
        "changed",
        "re-encoded",
        "add_frame ms (median)",
        "select ms (median)",
        "tokens kept",
    ]
    row = [
        str(summary.frames),
        str(summary.skipped),
        str(summary.keyframes),
        f"{100 * summary.changed_share:.1f}%",
        f"{100 * summary.reencoded_share:.1f}%",
        f"{summary.add_ms_median:.1f}",
        f"{summary.select_ms_median:.1f}",
        "-" if summary.kept_share is None else f"{100 * summary.kept_share:.0f}%",
    ]
    print_table(out, header, [row], right=header)
    out.print("wrote " + ", ".join(summary.outputs.values()), highlight=False)


def _check_fps(fps: float | None) -> None:
    """``--fps``: a finite rate in (0, MAX_FPS], else a usage error (exit 2)."""
    from ..video.run import check_fps

    try:
        check_fps(fps)
    except ConfigError as exc:
        raise typer.BadParameter(str(exc), param_hint="--fps") from None
