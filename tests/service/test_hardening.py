"""Issue 16: the service against attackers and careless clients -- bind policy, auth before any body, body
limits per route, connections that cannot pin the server, typed errors as JSON 4xx, readers that never wait.

HTTP tests run a real ``foveate serve`` on 127.0.0.1; the bind policy runs in process through Starlette's
TestClient with a non-loopback client address (no traffic leaves the machine)."""

from __future__ import annotations

import io
import socket
import struct
import subprocess
import sys
import time

import httpx
import pytest
from PIL import Image
from starlette.testclient import TestClient

from foveate.service import ServiceSettings, app_from_env, create_app
from foveate.service.guard import MAX_REQUEST_HEAD
from foveate.service.process import ServerProcess

from ..conftest import random_image

PUBLIC = ("203.0.113.5", 1234)  # TEST-NET-3: only ever an address in the ASGI scope, never a destination
TID = "0123456789abcdef0123456789abcdef-0123456789abcdef"


def png(arr) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    return buf.getvalue()


def dds(fourcc: bytes = b"XXXX", flags: int = 0x4) -> bytes:
    """A DDS file whose pixel format Pillow parses but does not implement (it raises NotImplementedError)."""
    head = struct.pack("<4sIIIIIII", b"DDS ", 124, 0x1007, 8, 8, 0, 0, 0) + b"\0" * 44
    pixel_format = struct.pack("<II4sIIIII", 32, flags, fourcc, 0, 0, 0, 0, 0)
    return head + pixel_format + struct.pack("<IIIII", 0x1000, 0, 0, 0, 0) + b"\0" * 256


def raw_exchange(port: int, request: bytes, sock: socket.socket | None = None) -> tuple[bytes, socket.socket]:
    """Send ``request`` in one piece and read one response (head + Content-Length body)."""
    s = sock or socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(request)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            return data, s
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        (int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")), 0
    )
    while len(body) < length:
        body += s.recv(65536)
    return head + b"\r\n\r\n" + body, s


# -- 1. one bind policy, whatever started the app -----------------------------------------------------------------


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("store")


def test_no_key_serves_loopback_clients_only(store_dir):
    app = create_app(ServiceSettings(store=store_dir, preset="fast"))
    with TestClient(app, client=PUBLIC) as c:
        for method, path in (("get", "/healthz"), ("post", "/v1/textures"), ("get", "/docs"), ("get", "/metrics")):
            r = c.request(method, path, content=png(random_image(16, 16)) if method == "post" else None)
            assert r.status_code == 403, (path, r.text)
            assert "FOVEATE_API_KEY" in r.json()["detail"] and "--allow-public" in r.json()["detail"]
    for client in (("127.0.0.1", 5), ("::1", 5), ("::ffff:127.0.0.1", 5), ("127.8.9.10", 5)):
        with TestClient(app, client=client) as c:
            assert c.get("/healthz").status_code == 200, client


def test_factory_path_applies_the_same_policy(store_dir, monkeypatch):
    """``uvicorn --factory foveate.service:app_from_env --host 0.0.0.0`` (and FOVEATE_HOST=0.0.0.0) without a
    key: the bind flag is not what decides, the request's address is."""
    monkeypatch.setenv("FOVEATE_STORE", str(store_dir))
    monkeypatch.setenv("FOVEATE_PRESET", "fast")
    monkeypatch.setenv("FOVEATE_HOST", "0.0.0.0")
    with TestClient(app_from_env(), client=PUBLIC) as c:
        r = c.post("/v1/textures", content=png(random_image(16, 16)))
        assert r.status_code == 403
    monkeypatch.setenv("FOVEATE_ALLOW_PUBLIC", "1")
    with TestClient(app_from_env(), client=PUBLIC) as c:
        assert c.post("/v1/textures", content=png(random_image(16, 16))).status_code == 201
    monkeypatch.delenv("FOVEATE_ALLOW_PUBLIC")
    monkeypatch.setenv("FOVEATE_API_KEY", "k3y")
    with TestClient(app_from_env(), client=PUBLIC) as c:
        assert c.get("/healthz").status_code == 200  # open route
        assert c.get(f"/v1/textures/{TID}").status_code == 401
        assert c.get(f"/v1/textures/{TID}", headers={"Authorization": "Bearer k3y"}).status_code == 404


def test_docs_need_the_key_unless_public_docs(store_dir):
    for public_docs, want in ((False, 401), (True, 200)):
        app = create_app(ServiceSettings(store=store_dir, preset="fast", api_key="k", public_docs=public_docs))
        with TestClient(app, client=PUBLIC) as c:
            for path in ("/docs", "/redoc", "/openapi.json"):
                assert c.get(path).status_code == want, (path, public_docs)
                assert c.get(path, headers={"Authorization": "Bearer k"}).status_code == 200


# -- 2. auth before any body; bodies read under the route's limit --------------------------------------------------


@pytest.fixture(scope="module")
def keyed(tmp_path_factory):
    store = tmp_path_factory.mktemp("keyed")
    with ServerProcess(store, env={"FOVEATE_API_KEY": "s3cret"}, args=("--max-upload-mb", "2")) as srv:
        yield srv


AUTH = {"Authorization": "Bearer s3cret"}


def test_malformed_or_huge_body_without_key_is_401(keyed):
    for route in ("select", "prompt"):
        url = f"{keyed.url}/v1/textures/{TID}/{route}"
        for body in (b"{not json", b"[" * 4096, b"0" * (3 << 20)):
            r = httpx.post(url, content=body, headers={"content-type": "application/json"}, timeout=60)
            assert r.status_code == 401, (route, len(body), r.status_code, r.text[:200])
    r = httpx.post(keyed.url + "/v1/textures", content=b"\0" * (5 << 20), timeout=60)
    assert r.status_code == 401


@pytest.mark.parametrize("route", ["select", "prompt"])
def test_query_body_over_1_mib_is_413_even_chunked(keyed, route):
    url = f"{keyed.url}/v1/textures/{TID}/{route}"
    big = b'{"text": "' + b"a" * (1 << 20) + b'"}'
    r = httpx.post(url, content=big, headers={**AUTH, "content-type": "application/json"}, timeout=60)
    assert r.status_code == 413 and "1 MiB" in r.json()["detail"]

    def chunks():  # no Content-Length: the limit must hold on the stream itself
        for _ in range(40):
            yield b" " * 65536

    r = httpx.post(url, content=chunks(), headers={**AUTH, "content-type": "application/json"}, timeout=60)
    assert r.status_code == 413 and "1 MiB" in r.json()["detail"]
    if route == "select":
        r = httpx.post(keyed.url + "/v1/textures", content=chunks(), headers=AUTH, timeout=60)  # 2.5 MiB > 2 MiB
        assert r.status_code == 413 and "--max-upload-mb" in r.json()["detail"]
    assert httpx.post(url, json={"text": "total"}, headers=AUTH).status_code == 404  # small bodies still pass


def test_head_limits_head_healthz_and_metrics(keyed):
    # a 100 KiB header in one piece: refused like the 64 KiB limit says (uvicorn alone only counts pieces)
    req = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (100 * 1024) + b"\r\n\r\n"
    resp, s = raw_exchange(keyed.port, req)
    s.close()
    assert resp.startswith(b"HTTP/1.1 431"), resp[:200]
    assert MAX_REQUEST_HEAD == 64 * 1024
    r = httpx.head(keyed.url + "/healthz")
    assert r.status_code == 200
    text = httpx.get(keyed.url + "/metrics", headers=AUTH).text
    assert 'foveate_rejected_total{reason="head_too_large"} 1.0' in text
    assert 'foveate_rejected_total{reason="unauthorized"}' in text


def _response_then_closed(sock: socket.socket, within: float = 1.0) -> tuple[bytes, float | None]:
    """Read one response's head from ``sock``, then wait up to ``within`` s for the server to close the connection
    (end of file, or a reset): (head, seconds from the response to the close, or None when it stayed open)."""
    sock.settimeout(30)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"closed before a response: {data[:200]!r}"
        data += chunk
    head = data.partition(b"\r\n\r\n")[0]
    t0 = time.monotonic()
    sock.settimeout(0.1)
    while time.monotonic() - t0 < within:
        try:
            if sock.recv(65536) == b"":
                return head, time.monotonic() - t0
        except TimeoutError:
            continue
        except OSError:  # a reset is a close too
            return head, time.monotonic() - t0
    return head, None


def _upload_head(path: str, length: int | None, auth: bool, ctype: str = "image/png") -> bytes:
    size = b"Transfer-Encoding: chunked\r\n" if length is None else b"Content-Length: %d\r\n" % length
    key = b"Authorization: Bearer s3cret\r\n" if auth else b""
    return b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\n%s%s\r\n" % (path.encode(), ctype.encode(), key, size)


def test_early_rejections_close_the_connection(keyed):
    """Issue 40, 10: a 401 or 413 answered before the body was read kept the connection open ~5 s without
    ``Connection: close`` (3,000 keyless partial uploads held the connection cap).  Such an answer says
    ``Connection: close`` and the server closes the connection at once."""
    select = f"/v1/textures/{TID}/select"
    cases = [
        ("401, upload headers only", _upload_head("/v1/textures", 10 << 20, auth=False), 401),
        ("401, part of the body sent", _upload_head("/v1/textures", 10 << 20, auth=False) + b"\0" * 200_000, 401),
        ("401, chunked", _upload_head("/v1/textures", None, auth=False) + b"10000\r\n" + b"\0" * 65536, 401),
        ("413 upload over --max-upload-mb", _upload_head("/v1/textures", 10 << 20, auth=True), 413),
        ("413 select over 1 MiB", _upload_head(select, 2 << 20, auth=True, ctype="application/json"), 413),
    ]
    chunk = b"10000\r\n" + b" " * 65536 + b"\r\n"  # a JSON body of spaces, 64 KiB a chunk: over 1 MiB midway
    cases.append(
        ("413 select over 1 MiB, chunked", _upload_head(select, None, True, "application/json") + chunk * 20, 413)
    )
    for name, request, status in cases:
        s = socket.create_connection(("127.0.0.1", keyed.port), timeout=30)
        try:
            try:
                s.sendall(request)
            except OSError:  # the server answered and closed before the client sent it all: allowed
                pass
            head, closed = _response_then_closed(s)
        finally:
            s.close()
        assert head.startswith(b"HTTP/1.1 %d" % status), (name, head)
        assert b"\r\nconnection: close" in head.lower(), (name, head)
        assert closed is not None, f"{name}: the connection stayed open after the response"
    assert httpx.get(keyed.url + "/healthz").status_code == 200


def test_rejected_partial_uploads_do_not_hold_the_connection_cap(tmp_path):
    """Issue 40, 10: keyless uploads that stop sending their body after the 401 may not fill the connection cap
    (before: each stayed open with a request in flight, and ``/healthz`` answered 503 until they closed)."""
    with ServerProcess(tmp_path, env={"FOVEATE_API_KEY": "s3cret"}, args=("--max-connections", "16")) as srv:
        socks, statuses = [], []
        try:
            for _ in range(60):
                s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
                socks.append(s)
                s.sendall(_upload_head("/v1/textures", 20 << 20, auth=False) + b"\0" * 4096)
                resp, _ = raw_exchange(srv.port, b"", s)
                statuses.append(resp[:12])
            assert set(statuses) == {b"HTTP/1.1 401"}, statuses
            for _ in range(3):
                assert httpx.get(srv.url + "/healthz", timeout=10).status_code == 200
        finally:
            for s in socks:
                s.close()


# -- 3. connections cannot pin the server ---------------------------------------------------------------------------


def _closed(socks: list[socket.socket]) -> int:
    n = 0
    for s in socks:
        s.setblocking(False)
        try:
            n += s.recv(100) == b""
        except BlockingIOError:
            pass
        except OSError:
            n += 1
    return n


def test_half_open_heads_are_closed_after_the_header_timeout(tmp_path):
    with ServerProcess(tmp_path, args=("--header-timeout", "1")) as srv:
        socks = [socket.create_connection(("127.0.0.1", srv.port)) for _ in range(200)]
        for i, s in enumerate(socks):
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n" if i % 2 else b"")  # half a head, or nothing
        # a well-behaved keep-alive client is unaffected
        with httpx.Client(base_url=srv.url) as c:
            assert c.get("/healthz").status_code == 200
        deadline = time.monotonic() + 10
        while _closed(socks) < len(socks):
            assert time.monotonic() < deadline, f"{_closed(socks)} of {len(socks)} closed"
            time.sleep(0.2)
        for s in socks:
            s.close()
        assert httpx.get(srv.url + "/healthz").status_code == 200


def test_connection_cap_evicts_idle_connections_under_a_low_file_limit(tmp_path):
    """256 open files, 400 idle sockets: the server keeps answering and its log stays small (before: every
    request timed out and each accept failure was logged)."""
    with ServerProcess(tmp_path, nofile=256, args=("--header-timeout", "30")) as srv:
        log0 = srv.log_bytes()
        socks = []
        for _ in range(400):
            try:
                socks.append(socket.create_connection(("127.0.0.1", srv.port), timeout=5))
            except OSError:
                break
        time.sleep(0.5)
        for _ in range(5):
            assert httpx.get(srv.url + "/healthz", timeout=10).status_code == 200
        assert _closed(socks) >= len(socks) - 64  # cap: 256 files - 256 reserve -> the minimum, 16..64 kept
        r = httpx.get(srv.url + "/metrics", timeout=10)
        assert 'foveate_connections_closed_total{reason="evicted_idle"}' in r.text
        for s in socks:
            s.close()
        assert srv.log_bytes() - log0 < 20_000, srv.log()[-2000:]


def test_repeated_log_lines_are_rate_limited():
    import logging

    from foveate.service.logs import RepeatFilter

    now = [0.0]
    f = RepeatFilter(burst=3, window=10.0, clock=lambda: now[0])
    rec = lambda msg: logging.LogRecord("asyncio", logging.ERROR, __file__, 1, msg, (), None)  # noqa: E731
    passed = [f.filter(rec("socket.accept() out of system resource")) for _ in range(1000)]
    assert sum(passed) == 3 and f.dropped == 997
    assert f.filter(rec("another line"))
    now[0] = 11.0
    r = rec("socket.accept() out of system resource")
    assert f.filter(r) and "997 more of this line" in r.msg


# -- 4. typed errors for every decoder failure; JSON 4xx and the connection survives ---------------------------------


def test_undecodable_variants_are_typed_errors():
    from foveate.core.errors import ImageDecodeError, UnsupportedInputError
    from foveate.core.io import load_image

    for data in (dds(b"XXXX"), dds(b"DX10"), dds(b"\0\0\0\0", flags=0x2), dds(b"\0\0\0\0", flags=0x80000)):
        with pytest.raises(UnsupportedInputError, match="convert it to PNG"):
            load_image(data)
    with pytest.raises(ImageDecodeError):
        load_image(b"DDS " + b"\xff" * 40)


def test_decoder_failure_is_json_4xx_and_keep_alive_survives(keyed):
    body = dds()
    req = (
        b"POST /v1/textures HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer s3cret\r\nContent-Type: "
        b"application/octet-stream\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )
    resp, s = raw_exchange(keyed.port, req)
    head, _, payload = resp.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 415") and b"application/json" in head, resp[:300]
    assert "convert it to PNG" in __import__("json").loads(payload)["detail"]
    resp, s = raw_exchange(keyed.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", s)  # same connection
    s.close()
    assert resp.startswith(b"HTTP/1.1 200"), resp[:200]


def test_cli_and_batch_on_undecodable_files(tmp_path):
    (tmp_path / "imgs").mkdir()
    (tmp_path / "imgs" / "bad.dds").write_bytes(dds())
    (tmp_path / "imgs" / "bad2.png").write_bytes(dds(b"DX10"))
    (tmp_path / "imgs" / "good.png").write_bytes(png(random_image(40, 48, 3)))
    cli = [sys.executable, "-m", "foveate.cli"]
    r = subprocess.run(
        cli + ["encode", str(tmp_path / "imgs" / "bad.dds"), "-o", str(tmp_path / "x.fvt")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 1 and r.stderr.startswith("error: ") and "Traceback" not in r.stderr, r.stderr
    r = subprocess.run(
        cli + ["encode", "--store", str(tmp_path / "st"), str(tmp_path / "imgs"), "--preset", "fast"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in r.stderr, r.stderr
    from foveate.store import TextureStore

    with TextureStore(tmp_path / "st") as st:
        assert len(list(st.ids())) == 1  # the good file was stored; the bad ones recorded, the batch went on
    assert "bad2.png" in r.stdout + r.stderr


def test_ocr_failure_on_a_valid_image_degrades():
    """rapidocr raises ResizeImgError on a 10 x 10000 strip: the text group is absent, with a note; the encode
    and a text query still work."""
    import numpy as np

    import foveate

    img = np.full((10, 10000, 3), 255, np.uint8)
    img[3:7, ::50] = 0
    tex = foveate.encode(img, preset="default", device="cpu")
    assert "text" in tex.absent
    assert any("text group is absent" in n for n in tex.extras["notes"])
    sel = foveate.select(tex, "total due", budget=700, mode="topk")
    assert len(sel) <= 700 and any("text group is absent" in n for n in sel.notes)
    again = foveate.Texture.from_bytes(tex.to_bytes())
    assert again.extras["notes"] == tex.extras["notes"]


def test_select_argument_types():
    import numpy as np

    import foveate
    from foveate.core.errors import QueryError

    tex = foveate.encode(random_image(64, 64, 5), preset="fast", device="cpu")
    for bad in (None, "page.png", random_image(8, 8)):
        with pytest.raises(QueryError, match="Texture"):
            foveate.select(bad, None)
    with pytest.raises(QueryError):
        foveate.select(tex, 3)
    for budget in (np.int64(40), np.int32(40), np.uint16(40)):
        sel = foveate.select(tex, None, budget)
        assert len(sel) <= 40 and type(sel.budget) is int


# -- 5. readers never wait -------------------------------------------------------------------------------------------


HOLD_LOCK = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("ROLLBACK")
"""


def hold_write_lock(db, seconds: float) -> subprocess.Popen:
    """Another process takes the store's write lock and keeps it for ``seconds``."""
    p = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(db), str(seconds)], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "locked"
    return p


def test_store_get_does_not_wait_for_another_writer(tmp_path):
    import foveate
    from foveate.store import TextureStore

    tex = foveate.encode(random_image(48, 48, 8), preset="fast", device="cpu")
    with TextureStore(tmp_path, touch_interval=0, timeout=5) as st:
        entry, _ = st.put(tex)
        st._conn().execute("UPDATE textures SET last_access = 1")  # old: the read wants to record a new time
        holder = hold_write_lock(st.db_path, 8)
        try:
            t0 = time.perf_counter()
            got = st.get(entry.id)
            waited = time.perf_counter() - t0
        finally:
            holder.wait(30)
        assert got is not None and got.id == tex.id
        assert waited < 2.0, f"a read waited {waited:.1f} s for the write lock"
        assert st.entry(entry.id).last_access == 1  # not written while locked ...
        assert st.flush_touches() == 1  # ... but kept, and written once the lock is free
        assert st.entry(entry.id).last_access > 1


def test_uncached_select_does_not_wait_for_another_writer(tmp_path):
    from foveate.store import TextureStore

    data = png(random_image(96, 96, 9))
    with ServerProcess(tmp_path, args=("--timeout", "20")) as srv:
        tid = httpx.post(srv.url + "/v1/textures", content=data, timeout=60).json()["id"]
    with TextureStore(tmp_path) as st:
        st._conn().execute("UPDATE textures SET last_access = 1")
        db = st.db_path
    with ServerProcess(tmp_path, args=("--timeout", "20")) as srv:  # a cold cache: the select reads the store
        holder = hold_write_lock(db, 12)
        try:
            t0 = time.perf_counter()
            r = httpx.post(f"{srv.url}/v1/textures/{tid}/select", json={"budget": 30}, timeout=60)
            waited = time.perf_counter() - t0
        finally:
            holder.wait(30)
        assert r.status_code == 200, r.text
        assert waited < 3.0, f"an uncached select waited {waited:.1f} s"


# -- 6. smaller -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_texture_over_the_store_cap_is_507_naming_the_flag(tmp_path, pool):
    with ServerProcess(tmp_path, args=("--store-max-mb", "0.01", "--pool", pool, "--workers", "1")) as srv:
        r = httpx.post(srv.url + "/v1/textures", content=png(random_image(200, 200, 4)), timeout=60)
        assert r.status_code == 507 and "retry-after" not in r.headers
        assert "--store-max-mb" in r.json()["detail"]
        assert httpx.get(srv.url + "/healthz").status_code == 200


def _png_header_only(width: int, height: int) -> bytes:
    """A PNG declaring width x height whose only pixel data is 4 bytes of garbage: any decode would fail."""
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", b"\xde\xad\xbe\xef")
    )


def test_budget_checked_from_the_image_size_before_decoding(tmp_path):
    """8000 x 8000 (64 MP) and 1 x 1,000,000 on the default budget in mode quadtree: its coarsest level alone needs
    more tokens -- said from the header, before decoding (the 64 MP file holds no pixel data at all).  (Mode auto,
    the default, takes the top-k layout there instead.)"""
    big = tmp_path / "big.png"
    big.write_bytes(_png_header_only(8000, 8000))
    strip = tmp_path / "strip.png"
    Image.new("RGB", (1_000_000, 1), "white").save(strip)
    cli = [sys.executable, "-m", "foveate.cli"]
    for cmd, path, tiles in (("select", big, 1024), ("select", strip, 3907), ("prompt", big, 1024)):
        args = [cmd, str(path), "-o", str(tmp_path / "out"), "--mode", "quadtree"]
        args += ["-q", "total"] if cmd == "prompt" else []
        r = subprocess.run(cli + args, capture_output=True, text=True, timeout=60)
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
        assert f"below the {tiles} tiles of the coarsest level" in r.stderr and "topk" in r.stderr, r.stderr


_ORPHAN_PARENT = """
import asyncio, os, sys
from foveate.service.engine import EncodePool
pool = EncodePool("process", 1, 1, 1)
print(asyncio.run(pool.run(os.getpid)), flush=True)  # the worker's pid, once it is up
os._exit(0)  # a server dying without any shutdown (as under SIGKILL)
"""


def _alive(pid: int) -> bool:
    try:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")  # a zombie has exited


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_process_workers_exit_when_their_server_dies_without_a_shutdown(tmp_path):
    log = tmp_path / "parent.log"
    with open(log, "w") as f:  # a file, not a pipe: an orphaned worker would hold a pipe open
        rc = subprocess.run(
            [sys.executable, "-c", _ORPHAN_PARENT], stdout=f, stderr=subprocess.STDOUT, timeout=180
        ).returncode
    assert rc == 0, log.read_text()
    worker = int(log.read_text().split()[-1])
    deadline = time.monotonic() + 15
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(worker), f"encode worker {worker} outlived its server"


@pytest.mark.slow
def test_a_text_preset_server_sets_up_the_query_encoder_at_start(tmp_path):
    """The first question on a machine would wait for the query encoder's export (7-17 s): a server whose preset
    reads text sets it up beside its start, before any question is asked; a ``fast`` server does not."""
    cache = tmp_path / "cache"
    with ServerProcess(tmp_path / "store", preset="default", env={"FOVEATE_CACHE": str(cache)}) as srv:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not list(cache.glob("query-encoder/*/verified.json")):
            time.sleep(0.5)
        assert list(cache.glob("query-encoder/*/verified.json")), srv.log()
    other = tmp_path / "other"
    with ServerProcess(tmp_path / "store2", preset="fast", env={"FOVEATE_CACHE": str(other)}):
        time.sleep(2)
    assert not other.exists()


def test_a_body_shorter_than_its_length_answers_408_not_504(tmp_path):
    """The client declared 5,000 bytes and sent 100: when the request's time runs out waiting for the rest, that is
    the client's doing (408, not 504), and the server logs no error for it."""
    with ServerProcess(tmp_path, args=("--timeout", "1")) as srv:
        head = b"POST /v1/textures HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\nContent-Length: 5000\r\n\r\n"
        answer, sock = raw_exchange(srv.port, head + png(random_image(8, 8, 1))[:100])
        sock.close()
        assert answer.startswith(b"HTTP/1.1 408") and b"Content-Length" in answer, answer[:200]
        assert httpx.get(srv.url + "/healthz").status_code == 200
        assert "unhandled error" not in srv.log()
