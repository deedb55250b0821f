"""A real ``foveate serve`` process per test module (loopback, a fresh store) and the bundled photo uploaded to it."""

from __future__ import annotations

import httpx
import pytest

from foveate.service.process import ServerProcess


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    store = tmp_path_factory.mktemp("store")
    with ServerProcess(store, preset="fast", args=("--max-upload-mb", "4", "--max-pixels", "4000000")) as srv:
        yield srv


@pytest.fixture(scope="module")
def photo_id(server, photo_path):
    r = httpx.post(server.url + "/v1/textures", content=photo_path.read_bytes(), timeout=60)
    assert r.status_code in (200, 201), r.text
    return r.json()["id"]
