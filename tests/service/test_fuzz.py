"""Property-based tests of the HTTP service against a real ``foveate serve`` on 127.0.0.1.

* **the schema** -- schemathesis generates requests from the service's OpenAPI document, valid and invalid, for every
  operation (real texture ids and real images among them, so the routes run to the end, not only their validation):
  never a 5xx, every status and content type documented, every response body as its schema says, every error JSON
  with a one-line ``detail``; the upload, select, crops and prompt routes each answer 2xx to some.
* **uploads** -- any small image in any common format, under any declared content type (curl's form-urlencoded
  included), is stored under the id the library gives it.
* **prompts** -- any valid prompt body answers 200 with a plan that keeps the route's promises (never more tokens
  than the whole image, at most ``max_crops`` crops, qwen2-vl's pictures as data URLs), or a 422 that says why.

Driven with hypothesis directly (schemathesis' pytest plugin does not load under pytest 9); examples are bounded
and derandomized so the suite takes well under a minute on 2 cores."""

from __future__ import annotations

import collections
import io

import httpx
import numpy as np
import pytest
from PIL import Image

import foveate
from foveate.service.guard import MAX_REQUEST_HEAD

from ..conftest import random_image

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

ROUTES = {  # the routes that must answer 2xx to some generated requests
    ("POST", "/v1/textures"),
    ("POST", "/v1/textures/{tid}/select"),
    ("GET", "/v1/textures/{tid}/crops"),
    ("POST", "/v1/textures/{tid}/prompt"),
}
NOWHERE = "f" * 32 + "-" + "f" * 16  # a well-formed id no texture has


def encoded(arr: np.ndarray, fmt: str) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format=fmt)
    return buf.getvalue()


def bounded(n: int):
    return settings(
        max_examples=n, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck)
    )


def one_line_detail(r) -> None:
    detail = r.json()["detail"]
    assert isinstance(detail, str) and detail and "\n" not in detail, r.text[:300]


def test_fuzz_no_server_errors(server, photo_id):
    schemathesis = pytest.importorskip("schemathesis")
    import requests
    from hypothesis.errors import Unsatisfiable
    from schemathesis import GenerationMode
    from schemathesis.checks import (
        content_type_conformance,
        not_a_server_error,
        response_schema_conformance,
        status_code_conformance,
    )

    checks = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
    schema = schemathesis.openapi.from_url(server.url + "/openapi.json")
    images = [encoded(random_image(24 + 7 * i, 40 - 5 * i, 100 + i), fmt) for i, fmt in enumerate(("PNG", "JPEG"))]
    statuses: dict[tuple[str, str], collections.Counter] = collections.defaultdict(collections.Counter)
    calls = [0]

    def check(case) -> None:
        calls[0] += 1
        if "tid" in (case.path_parameters or {}):
            if case.method == "DELETE":
                case.path_parameters["tid"] = NOWHERE  # never delete the shared texture
            elif calls[0] % 2:
                case.path_parameters["tid"] = photo_id  # a real texture half of the time
        if (case.method, case.path) == ("POST", "/v1/textures") and calls[0] % 3 == 0:
            data = images[calls[0] % 2]  # a real image a third of the time, as the schema's media type says
            case.body = {"file": data} if case.media_type == "multipart/form-data" else data
        try:
            r = case.call(base_url=server.url, timeout=60)
        except requests.ConnectionError:
            # uvicorn refuses a request head over the server's limit (64 KiB) before routing and closes the
            # connection while the client still sends: allowed; anything smaller must get an answer
            kw = case.as_transport_kwargs(base_url=server.url)
            prepared = requests.Request(
                kw["method"], kw["url"], params=kw.get("params"), headers=kw.get("headers")
            ).prepare()
            head = len(prepared.url) + sum(len(k) + len(str(v)) + 4 for k, v in prepared.headers.items())
            assert head > MAX_REQUEST_HEAD, (case.method, case.path, head)
            assert httpx.get(server.url + "/healthz").status_code == 200
            return
        statuses[(case.method, case.path)][r.status_code] += 1
        case.validate_response(r, checks=checks)  # raises, naming the check and the request, on a failure
        if r.status_code >= 400:
            one_line_detail(r)

    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == 12
    for op in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            run = bounded(30)(given(case=op.as_strategy(mode))(check))
            try:
                run()
            except Unsatisfiable:  # negative mode for an operation with no input to get wrong (/healthz)
                assert mode == GenerationMode.NEGATIVE and not op.path.startswith("/v1/")
    assert len(statuses) == 12, sorted(statuses)
    for route in ROUTES:
        ok = sum(n for code, n in statuses[route].items() if 200 <= code < 300)
        assert ok >= 3, (route, dict(statuses[route]))  # the route ran to the end, not only its validation


CONTENT_TYPES = [
    None,
    "image/png",
    "image/jpeg",
    "application/octet-stream",
    "application/x-www-form-urlencoded",  # curl --data-binary
    "text/plain",
    "multipart/form-data",
]


@given(
    h=st.integers(1, 48),
    w=st.integers(1, 48),
    seed=st.integers(0, 2**16),
    fmt=st.sampled_from(["PNG", "JPEG", "BMP", "WEBP", "TIFF", "GIF"]),
    ctype=st.sampled_from(CONTENT_TYPES),
)
@bounded(25)
def test_any_image_under_any_declared_type_is_stored(server, h, w, seed, fmt, ctype):
    data = encoded(random_image(h, w, seed), fmt)
    if ctype == "multipart/form-data":
        r = httpx.post(server.url + "/v1/textures", files={"file": ("x", data, "image/png")}, timeout=60)
    else:
        headers = {} if ctype is None else {"content-type": ctype}
        r = httpx.post(server.url + "/v1/textures", content=data, headers=headers, timeout=60)
    assert r.status_code in (200, 201), (fmt, ctype, r.status_code, r.text[:300])
    want = foveate.encode(foveate.load_image(data), preset="fast", device="cpu").id
    assert r.json()["id"] == want and (r.json()["width"], r.json()["height"]) == (w, h)


RULES = ["openai", "openai-patch", "anthropic", "gemini", "qwen2-vl", "llava-1.5", "patch:14"]


@st.composite
def prompt_bodies(draw, size: tuple[int, int]):
    w, h = size
    body: dict = {"text": draw(st.text(min_size=1, max_size=80).filter(str.strip))}
    points = draw(st.lists(st.tuples(st.integers(0, w - 1), st.integers(0, h - 1)), max_size=3))
    if points:
        body["points"] = [list(p) for p in points]
        body["point_labels"] = draw(st.lists(st.sampled_from([0, 1]), min_size=len(points), max_size=len(points)))
    boxes = []
    for _ in range(draw(st.integers(0, 2))):
        x0, y0 = draw(st.integers(0, w - 2)), draw(st.integers(0, h - 2))
        boxes.append([x0, y0, draw(st.integers(x0 + 1, w)), draw(st.integers(y0 + 1, h))])
    if boxes:
        body["boxes"] = boxes
    body["budget"] = draw(st.integers(1, 3000))
    body["mode"] = draw(st.sampled_from(["auto", "quadtree", "topk", "uniform"]))
    body["gist"] = draw(st.booleans())
    body["vlm"] = draw(st.sampled_from(RULES))
    body["format"] = draw(st.sampled_from(["png", "jpeg"]))
    if draw(st.booleans()):
        body["max_crops"] = draw(st.integers(1, 6))
    return body


def test_prompt_bodies(server, photo_id, photo):
    """Any valid prompt body: 200 with a plan that keeps the route's promises, or a 422 with a one-line detail
    (a budget below the coarsest level in quadtree mode, a point in the negative only, ...)."""
    size = (photo.shape[1], photo.shape[0])
    answered = collections.Counter()

    @given(body=prompt_bodies(size))
    @bounded(40)
    def check(body):
        r = httpx.post(f"{server.url}/v1/textures/{photo_id}/prompt", json=body, timeout=60)
        answered[r.status_code] += 1
        assert r.status_code in (200, 422), (body, r.status_code, r.text[:300])
        if r.status_code == 422:
            return one_line_detail(r)
        doc = r.json()
        ledger = doc["ledger"]
        assert ledger["plan_tokens"] <= ledger["image_tokens"], (body, ledger)
        crops = [p for p in ledger["pictures"] if p["kind"] == "crop"]
        assert len(crops) <= body.get("max_crops", 64), (body, ledger["pictures"])
        qwen = body["vlm"] == "qwen2-vl"
        assert (doc["pictures"] is not None) == qwen
        if qwen:
            media = "data:image/png;base64," if body["format"] == "png" else "data:image/jpeg;base64,"
            assert len(doc["pictures"]) == len(ledger["pictures"]) and all(p.startswith(media) for p in doc["pictures"])

    check()
    assert answered[200] >= 20, answered
