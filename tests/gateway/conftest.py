"""A real ``foveate gateway`` process on loopback in front of the stand-in provider (:mod:`.provider`), with the
default preset (the form page's text is read) and a fresh store, shared by the tests of this folder (they read its
counters as differences)."""

from __future__ import annotations

import base64

import pytest

from foveate.service.process import ServerProcess

from .provider import PictureHost, Provider

#: the gateway's own key in these tests, and the client's provider key (neither may reach a log)
GATEWAY_KEY = "gw-key-7f3a"
CLIENT_KEY = "sk-test-secret-91c2d4"


@pytest.fixture(scope="package")
def provider():
    with Provider() as p:
        yield p


@pytest.fixture(scope="package")
def gateway(provider, tmp_path_factory):
    store = tmp_path_factory.mktemp("store")
    args = (
        "--upstream",
        provider.url + "/v1",
        "--upstream-timeout",
        "2",
        "--log-requests",
        "--max-body-mb",
        "4",
        "--max-pixels",
        "4000000",
    )
    with ServerProcess(store, preset="default", args=args, command="gateway") as gw:
        yield gw


@pytest.fixture(scope="session")
def page_b64(page_path) -> str:
    return base64.b64encode(page_path.read_bytes()).decode()


@pytest.fixture(scope="package")
def picture_host(page_path):
    with PictureHost(page_path.read_bytes()) as h:
        yield h


@pytest.fixture(scope="package")
def gateway_opts(provider, tmp_path_factory):
    """A second gateway with the options off by default: earlier turns re-planned, pictures fetched from 127.0.0.1
    (the loopback picture host's address, so http is allowed), a 4 MiB body and picture limit, ``--budget auto``
    (the history and fetch tests compare against this same gateway's answers, so the budget rule is the same)."""
    store = tmp_path_factory.mktemp("store-opts")
    args = ("--upstream", provider.url, "--upstream-timeout", "5", "--replan-history", "--max-body-mb", "4")
    args += ("--fetch-hosts", "127.0.0.1", "--fetch-timeout", "3", "--budget", "auto")
    with ServerProcess(store, preset="default", args=args, command="gateway") as gw:
        yield gw
