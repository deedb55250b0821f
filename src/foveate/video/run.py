"""The ``foveate video`` command's work: stream a source through a new session and write the selections, the
statistics and an overlay video."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from ..core.errors import ConfigError, VideoError
from .frames import Frame, read_frames
from .predictor import VideoPredictor
from .state import VideoResult

DEFAULT_FPS = 24.0  # the overlay's frame rate when neither the caller nor the video gives a usable one
MAX_FPS = 1000.0  # the highest overlay frame rate taken (OpenCV's writer hangs or fails on absurd ones)


@dataclass
class VideoSummary:
    frames: int
    skipped: int
    keyframes: int
    changed_share: float
    reencoded_share: float
    add_ms_median: float
    select_ms_median: float
    kept_share: float | None
    outputs: dict[str, str]
    notes: list[str] = field(default_factory=list)  # distinct selection notes (e.g. "query text not used")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def run_video(
    source: str | Path,
    query: Any,
    output: str | Path,
    *,
    predictor: VideoPredictor,
    budget: int | None = None,
    prompt_frames: str = "first",
    overlay: bool = True,
    max_frames: int | None = None,
    fps: float | None = None,
    on_frame: Callable[[VideoResult], None] | None = None,
    **select_kwargs: Any,
) -> VideoSummary:
    """Stream ``source`` through a new session and write ``selections.jsonl`` (one selection document per frame,
    with the frame's statistics), ``stats.jsonl`` (statistics only) and ``overlay.mp4`` into ``output``.

    The outputs are written to temporary names in ``output`` and renamed into place only when the run completes: a
    run that fails (a bad ``fps``, an undecodable source, an interrupt) leaves the folder as it was.  ``fps``: the
    overlay's frame rate, more than 0 and at most :data:`MAX_FPS` (a :class:`ConfigError` otherwise); ``None``: the
    video's own, else 24."""
    check_fps(fps)
    reader = read_frames(source, max_pixels=predictor.config.max_pixels)
    out = Path(output)
    paths = {"selections": out / "selections.jsonl", "stats": out / "stats.jsonl"}
    if overlay:
        paths["overlay"] = out / "overlay.mp4"
    stale = () if overlay else (out / "overlay.mp4",)  # an earlier run's: it would not show these selections
    state = predictor.init_state()
    writer, size = None, None
    adds, sels, changed, reenc, kept, keyframes, n = [], [], [], [], [], 0, 0
    notes: dict[str, None] = {}
    frames = reader if max_frames is None else _take(reader, max_frames)
    with _staged(out, paths, stale) as tmps:
        try:
            with open(tmps["selections"], "w") as fsel, open(tmps["stats"], "w") as fstat:
                for res in predictor.propagate(
                    state, frames, query, budget, prompt_frames=prompt_frames, **select_kwargs
                ):
                    n += 1
                    st = res.stats.to_dict()
                    st.update(
                        {
                            "source": res.name,
                            "select_ms": round(res.selection.timings_ms["total"], 3),
                            "kept_share": None if res.kept_share is None else round(res.kept_share, 4),
                        }
                    )
                    fstat.write(json.dumps(st) + "\n")
                    doc = res.selection.to_dict()
                    doc["video"] = st
                    fsel.write(json.dumps(doc) + "\n")
                    adds.append(res.stats.timings_ms["total"])
                    sels.append(res.selection.timings_ms["total"])
                    changed.append(res.stats.changed_share)
                    reenc.append(res.stats.reencoded_share)
                    keyframes += res.stats.keyframe
                    if res.kept_share is not None:
                        kept.append(res.kept_share)
                    notes.update(dict.fromkeys(res.selection.notes))
                    if overlay:
                        image = state._require_frame().image
                        fps_out = _overlay_fps(fps, reader.fps)
                        writer, size = _write_overlay(
                            writer, size, image, res, tmps["overlay"], paths["overlay"], fps_out
                        )
                    if on_frame is not None:
                        on_frame(res)
        finally:
            if writer is not None:
                writer.release()
            reader.close()
        if n == 0:  # nothing to keep: the earlier run's files stay
            raise VideoError(f"{source}: no frame could be decoded ({len(reader.skipped)} skipped)")

    def med(xs: list[float]) -> float:
        return float(np.median(xs)) if xs else 0.0

    return VideoSummary(
        frames=n,
        skipped=len(reader.skipped),
        keyframes=keyframes,
        changed_share=float(np.mean(changed)),
        reencoded_share=float(np.mean(reenc)),
        add_ms_median=med(adds),
        select_ms_median=med(sels),
        kept_share=float(np.mean(kept)) if kept else None,
        outputs={k: str(v) for k, v in paths.items()},
        notes=list(notes)[:10],
    )


def check_fps(fps: float | None) -> None:
    """A :class:`ConfigError` unless ``fps`` is ``None`` or a finite frame rate in (0, :data:`MAX_FPS`]."""
    if fps is not None and not 0 < fps <= MAX_FPS:  # NaN fails both comparisons
        raise ConfigError(f"fps must be more than 0 and at most {MAX_FPS:g}, got {fps}")


def _overlay_fps(fps: float | None, video_fps: float | None) -> float:
    """The overlay's frame rate: ``fps`` (already checked), else the video's own if it is sensible, else 24."""
    if fps is not None:
        return fps
    if video_fps is not None and 0 < video_fps <= MAX_FPS:  # not 0, NaN or inf
        return video_fps
    return DEFAULT_FPS


@contextmanager
def _staged(out: Path, paths: dict[str, Path], stale: tuple[Path, ...] = ()) -> Iterator[dict[str, Path]]:
    """Temporary names in ``out`` for the outputs ``paths``: renamed over them when the block completes (and the
    ``stale`` files, an earlier run's outputs this run does not write, removed), removed when it fails -- with the
    folders this run created, if still empty -- so a failed run leaves ``out`` as it was."""
    created = [d for d in (out, *out.parents) if not d.exists()]  # deepest first
    out.mkdir(parents=True, exist_ok=True)
    tmps = {
        k: p.with_name(f".{p.stem}.{os.getpid()}.tmp{p.suffix}") for k, p in paths.items()
    }  # suffix: OpenCV's container
    try:
        yield tmps
        for k, p in paths.items():
            os.replace(tmps[k], p)
        for p in stale:
            p.unlink(missing_ok=True)
    except BaseException:
        for t in tmps.values():
            t.unlink(missing_ok=True)
        for d in created:
            try:
                d.rmdir()
            except OSError:  # not empty (or not ours to remove): keep it and its parents
                break
        raise


def _write_overlay(
    writer: cv2.VideoWriter | None,
    size: tuple[int, int] | None,
    image: np.ndarray,
    res: VideoResult,
    target: Path,
    final: Path,
    fps: float,
) -> tuple[cv2.VideoWriter, tuple[int, int]]:
    """Append one frame (heat map, tokens, a status line, the legend bar) to the overlay, opening ``target`` (the
    temporary name of ``final``, which errors name) on the first frame."""
    from ..render import render_overlay

    img = render_overlay(image, res.selection)
    label = (
        f"frame {res.index}  {'KEYFRAME ' + res.stats.reason if res.stats.keyframe else ''}  "
        f"re-encoded {100 * res.stats.reencoded_share:.0f}%"
    )
    cv2.putText(img, label, (6, image.shape[0] - 8), cv2.FONT_HERSHEY_SIMPLEX, 0.45, (255, 255, 255), 1, cv2.LINE_AA)
    if writer is None:
        size = (img.shape[1], img.shape[0])
        writer = cv2.VideoWriter(str(target), cv2.VideoWriter.fourcc(*"mp4v"), fps, size)
        if not writer.isOpened():
            raise VideoError(f"cannot write {final} (no mp4 encoder available); use --no-overlay")
    assert size is not None  # set with the writer, on the first frame
    if (img.shape[1], img.shape[0]) != size:  # a size change mid-stream: the video keeps its first size
        img = cv2.resize(img, size, interpolation=cv2.INTER_AREA)
    writer.write(cv2.cvtColor(img, cv2.COLOR_RGB2BGR))
    return writer, size


def _take(frames: Iterable[Frame], n: int) -> Iterator[Frame]:
    for i, f in enumerate(frames):
        if i >= n:
            return
        yield f
