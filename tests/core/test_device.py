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
