from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "src" / "foveate" / "examples"


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
