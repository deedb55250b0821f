"""The one place that decides device, dtype and CPU threads."""

from __future__ import annotations

import threading

import pytest
import torch

from foveate import DeviceError
from foveate.core.device import request_threads, resolve_device


def test_resolve_device():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(None).type in ("cpu", "cuda")
    with pytest.raises(DeviceError, match="unknown device"):
        resolve_device("gpu0")
    if not torch.cuda.is_available():
        with pytest.raises(DeviceError, match="not available"):
            resolve_device("cuda")


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_request_threads_restores_the_count(two_threads):
    with request_threads():
        assert torch.get_num_threads() == 1
        with request_threads():  # nested
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2
    with pytest.raises(RuntimeError):
        with request_threads():
            raise RuntimeError("boom")
    assert torch.get_num_threads() == 2


def test_request_threads_from_several_threads(two_threads):
    """Overlapping users: the count stays 1 while any is inside and comes back to 2 after the last leaves."""
    inside, seen = threading.Barrier(4), []

    def work():
        with request_threads():
            inside.wait()
            seen.append(torch.get_num_threads())
            inside.wait()

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == [1, 1, 1, 1]
    assert torch.get_num_threads() == 2


def test_cv_threads_lowers_opencv_and_restores_it():
    import cv2

    from foveate.core.device import cv_threads

    before = cv2.getNumThreads()
    cv2.setNumThreads(2)
    try:
        with cv_threads(1):
            assert cv2.getNumThreads() == 1
            with cv_threads(1):
                assert cv2.getNumThreads() == 1
        assert cv2.getNumThreads() == 2
    finally:
        cv2.setNumThreads(before)


def _tune_in_child(env: dict) -> str:
    """Run tune_allocator in a fresh interpreter (it acts once per process) and report what it did."""
    import os
    import subprocess
    import sys

    code = "import ctypes, foveate.core.device as d\nok = d.tune_allocator()\nprint(ok, d.tune_allocator())\n"
    out = subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True, timeout=60, check=True
    )
    return out.stdout.strip()


def test_tune_allocator_applies_once_on_glibc_and_can_be_switched_off():
    import platform

    on_glibc = platform.libc_ver()[0] == "glibc"
    assert _tune_in_child({}) == (f"{on_glibc} {on_glibc}")
    assert _tune_in_child({"FOVEATE_MALLOC": "0"}) == "False False"


def test_a_tuned_allocator_keeps_freed_memory_instead_of_faulting_it_in_again():
    """The point of the settings: an image-sized array allocated and freed over and over is served from the heap,
    not a fresh mmap (which the kernel must fault in, page by page, every time)."""
    import os
    import subprocess
    import sys

    code = (
        "import resource, numpy as np, foveate.core.device as d, sys\n"
        "if sys.argv[1] == '1': d.tune_allocator()\n"
        "a = np.ones(64 << 20, np.uint8); del a\n"
        "f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
        "for _ in range(20):\n"
        "    a = np.ones(48 << 20, np.uint8); del a\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)\n"
    )
    import platform

    if platform.libc_ver()[0] != "glibc":
        return
    faults = {}
    for tuned in ("0", "1"):
        out = subprocess.run(
            [sys.executable, "-c", code, tuned], capture_output=True, text=True, timeout=60, check=True, env=os.environ
        )
        faults[tuned] = int(out.stdout.strip())
    # 20 x 48 MB: the default allocator maps and faults in every one afresh (here ~10k faults: 4 KB pages and
    # transparent huge pages mixed; at least 24 a time with 2 MB pages only), the tuned one reuses the first
    assert faults["0"] >= 20 * 24, faults
    assert faults["1"] <= faults["0"] / 10, faults
