"""The one place that decides device, dtype and CPU threads.

Encoding runs its image filters in OpenCV on the CPU (10-20x faster than torch convolutions on 1-3 channel
images); the feature texture, the scorer and the selection live on ``resolve_device(...)``.  Features are
*stored* in ``STORAGE_DTYPE`` (half the bytes: a 40-channel 1024x1024 texture fits in < 1 MB) and *computed*
in ``COMPUTE_DTYPE``.  Threads: :data:`REQUEST_THREADS` for a query's MiniLM pass, :func:`ocr_threads` for the
OCR models (and :func:`ocr_backend` for their runtime), :func:`encode_overlap` for running the OCR beside the other
channel groups, :func:`train_workers` for ``foveate train``'s evaluation processes, :func:`eval_workers` for
``foveate eval``'s.

torch is imported on first use (``STORAGE_DTYPE`` and ``COMPUTE_DTYPE`` are resolved lazily), so reading this
module costs nothing.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import TYPE_CHECKING, Any

from .errors import DeviceError

if TYPE_CHECKING:
    import numpy as np
    import torch

_DTYPES = {"STORAGE_DTYPE": "float16", "COMPUTE_DTYPE": "float32"}


def __getattr__(name: str) -> Any:
    """``STORAGE_DTYPE`` (torch.float16) and ``COMPUTE_DTYPE`` (torch.float32), torch imported on first read."""
    if name in _DTYPES:
        import torch

        value = getattr(torch, _DTYPES[name])
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: torch runs an element-wise copy of fewer elements than this on the calling thread (``at::internal::GRAIN_SIZE``)
_TORCH_GRAIN = 32768


def to_storage(maps: list[np.ndarray], device: torch.device) -> list[torch.Tensor]:
    """(…, C) float32 NumPy tile maps as ``STORAGE_DTYPE`` tensors on ``device`` (converted on the CPU: half the bytes
    to move).  The conversion runs in pieces below torch's grain size, so on the calling thread: for maps this small
    torch's intra-op threads cost more than they save and keep spinning into what the process does next (see
    ``Texture.flat_features``); torch's vectorised float16 conversion is ~6x faster than NumPy's."""
    import numpy as np
    import torch

    out = []
    for m in maps:
        src = torch.from_numpy(np.ascontiguousarray(m))
        dst = torch.empty(src.shape, dtype=__getattr__("STORAGE_DTYPE"))
        flat_src, flat_dst = src.view(-1), dst.view(-1)
        for a in range(0, flat_src.numel(), _TORCH_GRAIN):
            flat_dst[a : a + _TORCH_GRAIN].copy_(flat_src[a : a + _TORCH_GRAIN])
        out.append(dst.to(device))
    return out


#: torch intra-op threads for small per-request CPU inference (a query's MiniLM embedding): one.  Measured on a
#: 2-core CPU (``scripts/embed_threads.py``; BENCHMARKS.md, "Text questions: OCR at encode, a MiniLM pass per
#: question"): two threads embed a question in ~5 ms on an idle machine but in ~470 ms when two other processes keep
#: the cores busy (each op's thread team waits for a descheduled member); one thread takes 9 ms idle, 17 ms busy.
#: Per-request latency must not depend on the neighbours, and a server gets its parallelism from concurrent requests.
REQUEST_THREADS = 1
#: torch threads for the encode's MiniLM pass over a page's OCR lines: one.  It runs on the text group's worker thread
#: beside the other channel groups (:func:`encode_overlap`), which keep the other core busy; a two-thread team then
#: waits for its descheduled member (see above).
ENCODE_TORCH_THREADS = 1


class _ThreadLimit:
    """A process-wide thread count (``get`` / ``set``) lowered to at most ``n`` while any user is inside
    :meth:`at_most`, restored when the last of any concurrent users leaves."""

    def __init__(self, get: Callable[[], int], set_: Callable[[int], None]) -> None:
        self.get, self.set = get, set_
        self.lock = threading.Lock()
        self.users = self.saved = 0

    @contextlib.contextmanager
    def at_most(self, n: int) -> Iterator[None]:
        with self.lock:
            if self.users == 0:
                self.saved = self.get()
                if self.saved > n:
                    self.set(n)
            self.users += 1
        try:
            yield
        finally:
            with self.lock:
                self.users -= 1
                if self.users == 0 and self.get() != self.saved:
                    self.set(self.saved)


def _torch() -> ModuleType:
    import torch

    return torch


def _cv2() -> ModuleType:
    import cv2

    return cv2


_TORCH_THREADS = _ThreadLimit(lambda: _torch().get_num_threads(), lambda n: _torch().set_num_threads(n))
_CV_THREADS = _ThreadLimit(lambda: _cv2().getNumThreads(), lambda n: _cv2().setNumThreads(n))


def request_threads(n: int | None = None) -> contextlib.AbstractContextManager[None]:
    """Run the block's torch CPU ops with ``n`` (default :data:`REQUEST_THREADS`) intra-op threads, the previous
    count restored when the last of any concurrent users leaves (the setting is process-wide)."""
    return _TORCH_THREADS.at_most(REQUEST_THREADS if n is None else n)


#: OpenCV threads for a video frame's motion-compensated update: one.  Its images are small (a 240 px flow copy,
#: cells of a quarter tile, crops of 5 % of the frame): on a 2-core CPU OpenCV's second thread saves no wall time there
#: and costs CPU in thread hand-offs (``foveate bench-video --cv-threads``; BENCHMARKS.md, "Video"); a whole frame's
#: encode (keyframes, from scratch) keeps OpenCV's default.
VIDEO_UPDATE_CV_THREADS = 1


def cv_threads(n: int) -> contextlib.AbstractContextManager[None]:
    """Run the block's OpenCV calls on at most ``n`` threads, OpenCV's count restored when the last of any concurrent
    users leaves (the setting is process-wide, as :func:`request_threads`' is for torch)."""
    return _CV_THREADS.at_most(n)


def cpu_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def ocr_threads() -> int:
    """onnxruntime intra-op threads of the OCR models: every core (``$FOVEATE_OCR_THREADS`` overrides).  The
    detector and recognizer are large convolutions on large inputs: on 2 cores two threads ran them 1.8-1.9x as
    fast as one when this was written (not recorded in BENCHMARKS.md), unlike a query's small MiniLM pass
    (:data:`REQUEST_THREADS`)."""
    return _env_count("FOVEATE_OCR_THREADS", cpu_cores())


#: the OCR models' runtimes :func:`ocr_backend` chooses among
OCR_BACKENDS = ("openvino", "onnxruntime", "cuda")


def ocr_backend() -> str:
    """Where the OCR models run: ``"cuda"`` (onnxruntime's CUDA provider) when onnxruntime-gpu sees a GPU, else
    ``"openvino"`` (Intel's CPU runtime, a core dependency) when it imports, else ``"onnxruntime"`` on the CPU;
    ``$FOVEATE_OCR_BACKEND`` forces one.  On a 2-core x86 CPU OpenVINO runs the PP-OCR text detector 3-4x as fast as
    onnxruntime with the same output to 1e-6 (BENCHMARKS.md, "Encode against the OCR engine alone")."""
    env = os.environ.get("FOVEATE_OCR_BACKEND", "").strip().lower()
    if env:
        if env not in OCR_BACKENDS:
            raise DeviceError(f"FOVEATE_OCR_BACKEND must be one of {', '.join(OCR_BACKENDS)}, got {env!r}")
        return env
    try:
        import onnxruntime

        if "CUDAExecutionProvider" in onnxruntime.get_available_providers():
            return "cuda"
    except ImportError:
        pass
    try:
        import openvino  # noqa: F401
    except ImportError:
        return "onnxruntime"
    return "openvino"


def train_workers() -> int:
    """Processes in which ``foveate train`` fits its rankers side by side and evaluates selections (forked from the
    process that holds the textures; every one runs its models on one thread): every core
    (``$FOVEATE_TRAIN_WORKERS`` overrides).  The work is small models, numpy and Python: one core each."""
    return _env_count("FOVEATE_TRAIN_WORKERS", cpu_cores())


def eval_workers() -> int:
    """Processes among which ``foveate eval`` shares a set's images on the CPU when it reads no text (forked; each
    evaluates its images as one process would, so the records are the same): every core (``$FOVEATE_EVAL_WORKERS``
    overrides).  A run that reads text takes one process: the OCR already runs on every core (:func:`ocr_threads`)."""
    return _env_count("FOVEATE_EVAL_WORKERS", cpu_cores())


def _env_count(name: str, default: int) -> int:
    """A count from the environment variable ``name`` (at least 1), else ``default``."""
    env = os.environ.get(name, "").strip()
    if not env:
        return default
    try:
        return max(1, int(env))
    except ValueError:
        raise DeviceError(f"{name} must be a whole number, got {env!r}") from None


#: glibc ``mallopt`` parameters (malloc.h) and the values :func:`tune_allocator` sets
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3
ALLOCATOR = {"mmap_threshold": 256 << 20, "trim_threshold": 512 << 20, "top_pad": 64 << 20}


@functools.cache
def tune_allocator() -> bool:
    """Keep freed memory in the process for the next encode (glibc only; once per process; ``$FOVEATE_MALLOC=0``
    leaves the allocator alone).  By default glibc serves every array above a threshold (at most 32 MB) with a fresh
    ``mmap`` and trims freed memory back to the OS, so an encode that makes and frees many image-sized arrays pays
    page faults on every one: on 2 cores a 960x540 frame's ``fast`` encode spent half its time in the kernel
    (BENCHMARKS.md, "The allocator").  The price: the process keeps its high-water mark of memory until it exits.
    The command line and the service call this at start; a library user may call it once.  Returns whether the
    settings apply."""
    if os.environ.get("FOVEATE_MALLOC", "1").strip() == "0":
        return False
    try:
        import ctypes

        mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    except OSError:
        return False
    # not glibc (macOS, Windows, musl without mallopt): nothing to tune
    return mallopt is not None and all(
        mallopt(k, v) == 1
        for k, v in (
            (_M_MMAP_THRESHOLD, ALLOCATOR["mmap_threshold"]),
            (_M_TRIM_THRESHOLD, ALLOCATOR["trim_threshold"]),
            (_M_TOP_PAD, ALLOCATOR["top_pad"]),
        )
    )


def encode_overlap() -> bool:
    """Run the slow, GIL-releasing channel groups (OCR) on a worker thread beside the others during an encode: on
    more than one core (``$FOVEATE_ENCODE_OVERLAP=0`` turns it off)."""
    return cpu_cores() > 1 and os.environ.get("FOVEATE_ENCODE_OVERLAP", "1").strip() != "0"


def resolve_device(device: str | torch.device | None = None) -> torch.device:
    """Turn ``None``/``"auto"``/``"cpu"``/``"cuda"``/``"cuda:1"``/``"mps"`` into an available ``torch.device``.

    ``None`` and ``"auto"`` pick CUDA when it is available, else the CPU.  Asking for a device that is not
    available is a :class:`DeviceError`, never a silent fallback.
    """
    import torch

    if device is None or (isinstance(device, str) and device.strip().lower() in ("", "auto")):
        return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise DeviceError(f"unknown device {device!r}; use 'cpu', 'cuda', 'cuda:N' or 'auto'") from exc
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise DeviceError("device 'cuda' was asked for but CUDA is not available; use --device cpu")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise DeviceError(f"device {dev} does not exist: {torch.cuda.device_count()} CUDA device(s) found")
    elif dev.type == "mps":
        if not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
            raise DeviceError("device 'mps' was asked for but is not available; use --device cpu")
    elif dev.type != "cpu":
        raise DeviceError(f"unsupported device type {dev.type!r}; use 'cpu', 'cuda' or 'mps'")
    return dev


def describe(device: torch.device) -> str:
    """A short human-readable name for logs and benchmark records."""
    import torch

    if device.type == "cuda":
        return f"{device} ({torch.cuda.get_device_name(device)})"
    return str(device)
