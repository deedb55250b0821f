"""Reading frames: a video file (OpenCV; FFmpeg decodes mp4, webm, ...) or a folder of images, decoded one at a
time (:class:`FrameReader`, :func:`read_frames`); a frame that cannot be decoded mid-stream is skipped with a
:class:`FrameSkippedWarning`."""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from ..core.errors import ImageError, VideoError
from ..core.io import DEFAULT_MAX_PIXELS, load_image

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".webp", ".bmp", ".tif", ".tiff"}


class FrameSkippedWarning(UserWarning):
    """A frame mid-stream could not be decoded and was skipped."""


@dataclass
class Frame:
    """One decoded frame: its position in the source, a name for reports, the RGB pixels (H, W, 3) uint8."""

    index: int
    name: str
    image: np.ndarray


def _natural_key(name: str) -> list[int | str]:
    return [int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", name)]


class FrameReader:
    """The frames of a video file (OpenCV; FFmpeg decodes mp4, webm, ...) or of a folder of images (sorted by name,
    numbers in numeric order), decoded one at a time.  Iterate it to get :class:`Frame` objects.

    Errors (:class:`VideoError`): no such path, an empty folder or one without image files, a single image file,
    a file OpenCV cannot open as a video or that has no decodable frame.  A frame that cannot be decoded
    mid-stream is skipped with a :class:`FrameSkippedWarning`.

    Attributes:
        kind: ``"folder"`` or ``"video"``.  count: frames announced (files, or the container's frame count; may
        be 0 when unknown).  fps: the video's frame rate (``None`` for a folder).
    """

    def __init__(self, source: str | Path, max_pixels: int = DEFAULT_MAX_PIXELS) -> None:
        self.path = Path(source)
        self.max_pixels = max_pixels
        self.fps: float | None = None
        self.skipped: list[str] = []  # frames that could not be decoded (each also warned about)
        self._cap: cv2.VideoCapture | None = None
        self._first: np.ndarray | None = None  # the video's first frame (BGR), read to check the file
        path = self.path
        if not path.exists():
            raise VideoError(f"{path}: no such file or folder")
        if path.is_dir():
            self.kind = "folder"
            self._files = sorted(
                (f for f in path.iterdir() if f.is_file() and f.suffix.lower() in IMAGE_SUFFIXES),
                key=lambda f: _natural_key(f.name),
            )
            if not self._files:
                raise VideoError(f"{path}: the folder has no image frames ({', '.join(sorted(IMAGE_SUFFIXES))})")
            self.count = len(self._files)
            return
        self.kind = "video"
        if path.suffix.lower() in IMAGE_SUFFIXES:
            raise VideoError(
                f"{path}: a single image, not a video; use `foveate select` for an image, or pass a folder of frames"
            )
        if path.stat().st_size == 0:
            raise VideoError(f"{path}: the file is empty (0 bytes)")
        cap = cv2.VideoCapture(str(path))
        if not cap.isOpened():
            raise VideoError(
                f"{path}: not a readable video (OpenCV/FFmpeg cannot open it); pass a video file "
                "(mp4, webm, ...) or a folder of frames"
            )
        ok, first = cap.read()
        if not ok or first is None:
            cap.release()
            raise VideoError(f"{path}: no decodable video frame")
        h, w = first.shape[:2]
        if h * w > max_pixels:
            cap.release()
            raise VideoError(
                f"{path}: frames of {w}x{h} = {w * h:,} pixels exceed the limit of {max_pixels:,}; "
                "raise max_pixels (--max-pixels) if you trust the file"
            )
        self._cap, self._first = cap, first
        self.count = max(int(cap.get(cv2.CAP_PROP_FRAME_COUNT) or 0), 0)
        fps = float(cap.get(cv2.CAP_PROP_FPS) or 0.0)
        self.fps = fps if 0 < fps < 1000 else None

    def __iter__(self) -> Iterator[Frame]:
        if self.kind == "folder":
            for i, f in enumerate(self._files):
                try:
                    image = load_image(f, max_pixels=self.max_pixels)
                except ImageError as exc:
                    self._skip(f.name, f"{_first_line(exc)}; frame skipped")
                    continue
                yield Frame(i, f.name, image)
            return
        cap, first = self._cap, self._first
        if cap is None or first is None:  # both set by __init__, both cleared here and by close()
            raise VideoError(f"{self.path}: the reader was closed or already consumed; open a new FrameReader")
        self._cap = self._first = None
        try:
            yield Frame(0, "frame 0", cv2.cvtColor(first, cv2.COLOR_BGR2RGB))
            i = 1
            missed: list[int] = []
            while True:
                ok, bgr = cap.read()
                if not ok or bgr is None:
                    if self.count and i < self.count and len(missed) < 8:
                        missed.append(i)  # maybe a corrupt frame: try the next ones before calling it the end
                        i += 1
                        continue
                    if missed:
                        warnings.warn(
                            f"{self.path.name}: the video ended at frame {missed[0]} of the {self.count} its "
                            "header announces (truncated?)",
                            FrameSkippedWarning,
                            stacklevel=2,
                        )
                    break
                for j in missed:
                    self._skip(f"frame {j}", f"{self.path.name}: frame {j} could not be decoded; frame skipped")
                missed = []
                yield Frame(i, f"frame {i}", cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB))
                i += 1
        finally:
            cap.release()

    def _skip(self, name: str, message: str) -> None:
        self.skipped.append(name)
        warnings.warn(message, FrameSkippedWarning, stacklevel=3)

    def close(self) -> None:
        if self._cap is not None:
            self._cap.release()
            self._cap = self._first = None


def read_frames(source: str | Path, max_pixels: int = DEFAULT_MAX_PIXELS) -> FrameReader:
    """Frames of a video file or a folder of images, one at a time (see :class:`FrameReader`)."""
    return FrameReader(source, max_pixels=max_pixels)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
