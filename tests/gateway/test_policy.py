"""The gateway's own key and bind policy (as ``foveate serve``'s), its start-up errors, and its settings."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx
import openai
import pytest

from foveate.core.errors import ConfigError
from foveate.gateway import GatewaySettings
from foveate.service.process import ServerProcess

from .conftest import CLIENT_KEY, GATEWAY_KEY


@pytest.fixture(scope="module")
def keyed(provider, tmp_path_factory):
    args = ("--upstream", provider.url)
    env = {"FOVEATE_API_KEY": GATEWAY_KEY}
    with ServerProcess(tmp_path_factory.mktemp("store"), "fast", args, env=env, command="gateway") as gw:
        yield gw


def test_the_gateways_key_is_its_own_header(keyed, provider):
    client = openai.OpenAI(base_url=keyed.url + "/v1", api_key=CLIENT_KEY, max_retries=0)
    with pytest.raises(openai.AuthenticationError) as e:
        client.models.list()
    assert "x-foveate-key" in e.value.message
    assert httpx.get(keyed.url + "/healthz").status_code == 200  # open without the key
    assert httpx.get(keyed.url + "/metrics").status_code == 401
    keyed_client = openai.OpenAI(
        base_url=keyed.url + "/v1", api_key=CLIENT_KEY, max_retries=0, default_headers={"x-foveate-key": GATEWAY_KEY}
    )
    assert [m.id for m in keyed_client.models.list()] == ["gpt-5.2"]
    head = provider.last().headers
    assert "x-foveate-key" not in head and head["authorization"] == f"Bearer {CLIENT_KEY}"  # the client's, not ours
    assert GATEWAY_KEY not in keyed.log()


def _gateway(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FOVEATE_") or k == "FOVEATE_CACHE"}
    cmd = [sys.executable, "-m", "foveate.cli", "gateway", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--upstream", "api.openai.com"), "must be an http(s) URL"),
        (("--upstream", "http://127.0.0.1:9", "--host", "0.0.0.0"), "refusing to listen on 0.0.0.0"),
        (("--upstream", "http://127.0.0.1:9", "--budget", "0"), "budget must be at least 1"),
        (("--upstream", "http://127.0.0.1:9", "--cache-mb", "nan"), "cache_mb must be a number >= 0"),
        (("--upstream", "http://127.0.0.1:9", "--max-body-mb", "nan"), "max_body_mb must be a positive number"),
        (("--upstream", "http://127.0.0.1:9", "--upstream-timeout", "inf"), "upstream_timeout must be a positive"),
        (("--upstream", "http://127.0.0.1:9", "--port", "99999"), "port must be at most 65535"),
        (("--upstream", "http://127.0.0.1:9", "--log-level", "bogus"), "--log-level must be one of"),
    ],
)
def test_bad_start_is_one_line(args, says):
    done = _gateway(*args)
    assert done.returncode == 1
    assert says in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_settings_from_env_and_flags():
    s = GatewaySettings.from_env({"FOVEATE_UPSTREAM": "https://api.anthropic.com/v1/", "FOVEATE_BUDGET": "128"})
    assert (s.upstream, s.budget) == ("https://api.anthropic.com", 128)  # a trailing /v1 is dropped
    assert GatewaySettings.from_env({"FOVEATE_BUDGET": "128"}, upstream="http://x:1", budget=64).budget == 64
    with pytest.raises(ConfigError, match="FOVEATE_BUDGET"):
        GatewaySettings.from_env({"FOVEATE_BUDGET": "lots"}, upstream="http://x:1")
    with pytest.raises(ConfigError, match="upstream_timeout"):
        GatewaySettings(upstream="http://x:1", upstream_timeout=0)


def test_embedded_app_answers_502_when_the_upstream_is_down(tmp_path):
    """``create_app`` in the caller's process (here Starlette's in-process client, which is no loopback address: hence
    ``allow_public``); the upstream is a port nothing listens on."""
    from starlette.testclient import TestClient

    from foveate.gateway import create_app
    from foveate.service.process import free_port

    app = create_app(upstream=f"http://127.0.0.1:{free_port()}", store=tmp_path, preset="fast", allow_public=True)
    body = {"model": "gpt-5.2", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
    with TestClient(app) as client:
        r = client.post("/v1/chat/completions", json=body)
        assert r.status_code == 502 and r.json()["error"]["type"] == "server_error"
        assert "could not be reached" in r.json()["error"]["message"]
        r = client.post("/v1/messages", json=body)
        assert r.status_code == 502 and r.json() == {
            "type": "error",
            "error": {"type": "api_error", "message": r.json()["error"]["message"]},
        }
        assert client.get("/healthz").json()["status"] == "ok"


def test_a_body_shorter_than_its_length_answers_408(keyed):
    """Content-Length 5,000 and 100 bytes sent: after ``BODY_IDLE_S`` without a byte the gateway answers 408 (it
    used to hold the connection for as long as the client did)."""
    import socket

    from foveate.gateway import app as gateway_app

    head = (
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"x-foveate-key: {GATEWAY_KEY}\r\nContent-Length: 5000\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", keyed.port), timeout=gateway_app.BODY_IDLE_S + 20) as sock:
        sock.sendall(head + b'{"model": "gpt-5.2", "messages": [' + b" " * 64)
        answer = b""  # the head and the body may come in separate segments: read until the server closes
        while b"stopped after" not in answer and (chunk := sock.recv(65536)):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 408") and b"stopped after" in answer, answer[:300]
