"""``--fetch-hosts``: pictures by URL fetched only from the listed hosts, under the rules of
:mod:`foveate.gateway.fetch`; every refusal or failure forwards the request byte for byte (``fetch-failed``), and a
host not listed is never contacted.  The picture host is a loopback server (:class:`.provider.PictureHost`)."""

from __future__ import annotations

import asyncio

import anthropic
import openai
import pytest

from foveate.core.errors import ConfigError
from foveate.gateway import GatewaySettings
from foveate.gateway.fetch import FetchFailed, check_url, resolve

from .conftest import CLIENT_KEY
from .helpers import pictures
from .test_gateway import QUESTION, chat_messages

LISTED = frozenset({"127.0.0.1", "images.example.com"})


def oa(gw) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.url + "/v1", api_key=CLIENT_KEY, max_retries=0)


def by_url(url: str, question: str = QUESTION) -> list[dict]:
    return [
        {
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": question}],
        }
    ]


def test_a_listed_hosts_picture_is_fetched_and_replanned(gateway_opts, provider, picture_host, page_b64):
    ref = oa(gateway_opts).chat.completions.with_raw_response.create(
        model="gpt-5.2", messages=chat_messages(page_b64)[1:]
    )
    want = pictures(provider.last().json(), "openai-chat")
    for path in ("/page.png", "/here"):  # directly, and through a redirect on the same host
        before = len(picture_host.hits)
        r = oa(gateway_opts).chat.completions.with_raw_response.create(
            model="gpt-5.2", messages=by_url(picture_host.url(path))
        )
        assert "x-foveate-passthrough" not in r.headers
        assert pictures(provider.last().json(), "openai-chat") == want  # as if the page had come as a data URL
        assert r.headers["x-foveate-sent-tokens"] == ref.headers["x-foveate-sent-tokens"]
        assert r.headers["x-foveate-cache"] == "hit"  # the same pixels: no second encode
        assert picture_host.hits[before:] == (["/page.png"] if path == "/page.png" else ["/here", "/page.png"])
    client = anthropic.Anthropic(base_url=gateway_opts.url, api_key=CLIENT_KEY, max_retries=0)
    source = {"type": "url", "url": picture_host.url("/page.png")}
    content = [{"type": "image", "source": source}, {"type": "text", "text": QUESTION}]
    r = client.messages.with_raw_response.create(
        model="claude-sonnet-4-6", max_tokens=16, messages=[{"role": "user", "content": content}]
    )
    sent = provider.last().json()["messages"][0]["content"]
    assert pictures(provider.last().json(), "anthropic") and all(
        p["source"]["type"] == "base64" for p in sent if p["type"] == "image"
    )


def test_a_host_not_listed_is_never_contacted(gateway_opts, provider, picture_host):
    before = len(picture_host.hits)
    for url in (picture_host.url("/page.png", "localhost"), f"https://127.0.0.1.nip.io:{picture_host.port}/p.png"):
        r = oa(gateway_opts).chat.completions.with_raw_response.create(model="gpt-5.2", messages=by_url(url))
        assert r.headers["x-foveate-passthrough"] == "no-picture"
        assert provider.last().body == r.http_request.content
    assert picture_host.hits[before:] == []


@pytest.mark.parametrize("path", ["/big.png", "/big-stream.png", "/away", "/text", "unreachable"])
def test_refused_fetches_pass_through_byte_for_byte(gateway_opts, provider, picture_host, path):
    before = len(picture_host.hits)
    r = oa(gateway_opts).chat.completions.with_raw_response.create(
        model="gpt-5.2",
        messages=by_url(picture_host.url(path) if path != "unreachable" else "http://127.0.0.1:9/p.png"),
    )
    assert r.status_code == 200 and r.headers["x-foveate-passthrough"] == "fetch-failed"
    assert provider.last().body == r.http_request.content
    assert "/away.png" not in picture_host.hits[before:]  # the redirect to another host was not followed


@pytest.mark.slow
def test_a_slow_host_times_out_into_a_passthrough(gateway_opts, provider, picture_host):
    r = oa(gateway_opts).chat.completions.with_raw_response.create(
        model="gpt-5.2", messages=by_url(picture_host.url("/slow.png"))
    )
    assert r.headers["x-foveate-passthrough"] == "fetch-failed"
    assert provider.last().body == r.http_request.content


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1@localhost/p.png",  # user info: the host is localhost (and no user info is fetched)
        "https://images.example.com@evil.test/p.png",
        "http://localhost#@127.0.0.1/p.png",
        "http://2130706433/p.png",  # 127.0.0.1 spelled as a number
        "http://127.1/p.png",
        "http://0x7f000001/p.png",
        "http://[::ffff:127.0.0.1]/p.png",  # not the address as listed
        "https://images.example.com.evil.test/p.png",  # no suffix match
        "https://evil.images.example.com/p.png",
        "http://127.0.0.1\\@evil.test/p.png",
        "http://images.example.com/p.png",  # https only for a name
        "ftp://127.0.0.1/p.png",
        "file:///etc/passwd",
    ],
)
def test_url_tricks_are_refused(url):
    with pytest.raises(FetchFailed):
        check_url(url, LISTED)


def test_listed_urls_pass_the_checks():
    assert check_url("https://IMAGES.example.com/a/p.png?x=1", LISTED).path == "/a/p.png?x=1"
    assert check_url("http://127.0.0.1:8080/p.png", LISTED).port == 8080


def test_a_listed_name_resolving_to_a_private_address_is_refused():
    target = check_url("https://localhost/p.png", frozenset({"localhost"}))
    with pytest.raises(FetchFailed, match="non-public address"):
        asyncio.run(resolve(target))


def test_fetch_hosts_settings():
    s = GatewaySettings.from_env({"FOVEATE_FETCH_HOSTS": "images.example.com, CDN.example.com"}, upstream="http://x:1")
    assert s.fetch_hosts == ("images.example.com", "cdn.example.com")
    for bad in ("*.example.com", "example.com:443", "https://example.com"):
        with pytest.raises(ConfigError, match="exact host names"):
            GatewaySettings(upstream="http://x:1", fetch_hosts=bad)  # type: ignore[arg-type]
