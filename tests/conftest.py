from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "src" / "foveate" / "examples"

# foveate's own cache (the exported query encoder, foveate.query.text.query_onnx): one per test session, shared with
# the subprocesses the tests start, removed at the end -- tests never write to the user's ~/.cache/foveate
_OWN_CACHE = None
if not os.environ.get("FOVEATE_CACHE"):
    _OWN_CACHE = os.environ["FOVEATE_CACHE"] = tempfile.mkdtemp(prefix="foveate-test-cache-")


def pytest_sessionfinish(session, exitstatus):
    if _OWN_CACHE:
        shutil.rmtree(_OWN_CACHE, ignore_errors=True)


@pytest.fixture(scope="session")
def page_path() -> Path:
    return EXAMPLES / "page.png"


@pytest.fixture(scope="session")
def photo_path() -> Path:
    return EXAMPLES / "photo.jpg"


@pytest.fixture(scope="session")
def photo(photo_path) -> np.ndarray:
    from foveate import load_image

    return load_image(photo_path)


@pytest.fixture(scope="session")
def page():
    from foveate.synth import invoice_page

    return invoice_page()


@pytest.fixture(scope="session")
def page_texture(page):
    import foveate

    return foveate.encode(page.image, device="cpu")


@pytest.fixture(scope="session")
def photo_texture(photo):
    import foveate

    return foveate.encode(photo, preset="full", device="cpu")


def random_image(h: int, w: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
