"""The URLs a user gives (webhooks, ``--upstream``, the OTLP export): the server takes exactly
what the API schema states (``simeval.checks.URL_PATTERN``, the settings' ``otlp_export``
pattern), so that a schema-valid URL is never refused and a schema-invalid one never stored
(Schemathesis found "https://00iCZM7c0sq*" stored, which the schema refuses)."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from simeval.checks import URL_PATTERN, check_url
from simeval.errors import InvalidInput
from simeval.web import create_app
from simeval.web.schema import OTLP_URL

SCHEMA = re.compile(OTLP_URL)  # no \p{...} in it: Python's re reads it as JSON Schema does


def taken(url: str) -> bool:
    try:
        check_url(url, "the URL")
    except InvalidInput:
        return False
    return True


GOOD = [
    "http://127.0.0.1:4318",
    "https://collector.internal/v1/logs?x=1#f",
    "http://[::1]:9/hook",
    "http://[::ffff:10.0.0.1]/",
    "https://a.b-c_d~e:65535/",
    " http://h ",
]
BAD = [
    "https://00iCZM7c0sq*",  # a host with a character no host name has
    "HTTP://h",
    "ftp://h",
    "https://user:secret@h",  # credentials would be logged with the URL
    "https://h:0",
    "https://h:65536",
    "https://h:",
    "https://bücher.de",  # punycode: https://xn--bcher-kva.de
    "https://h/é",  # percent-encoded: https://h/%C3%A9
    "http://[::1",
    "http://[:::]/",
    "http://h/a b",
]


@pytest.mark.parametrize("url", GOOD)
def test_taken_by_both(url: str) -> None:
    assert taken(url) and SCHEMA.search(url)


@pytest.mark.parametrize("url", BAD)
def test_refused_by_both(url: str) -> None:
    assert not taken(url) and not SCHEMA.search(url)


@settings(max_examples=500, deadline=None)
@given(st.from_regex(f"^{URL_PATTERN}$", fullmatch=True).filter(lambda u: len(u) <= 2000))
def test_what_the_pattern_generates_is_taken(url: str) -> None:
    assert taken(url), url


_ALPHABET = "htps:/[]0123456789abf.-_~@*?#é %:"


@settings(max_examples=1000, deadline=None)
@given(st.text(_ALPHABET, max_size=30).map(lambda tail: "http" + tail))
def test_the_server_and_the_schema_agree(url: str) -> None:
    if url.strip():
        assert taken(url) == bool(SCHEMA.search(url)), url


def test_an_ipv6_host_is_an_address() -> None:
    host = "http://[2001:db8::8a2e:370:7334]:8080/x"
    assert taken(host) and SCHEMA.search(host)
    ipaddress.IPv6Address("2001:db8::8a2e:370:7334")


def test_settings_refuse_what_the_schema_refuses(new_sqlite: Callable[..., str]) -> None:
    app = create_app(new_sqlite("urls.db"))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        r = client.patch("/api/settings", json={"otlp_export": "https://00iCZM7c0sq*"})
        assert r.status_code == 400 and "URL" in r.json()["error"]
        assert client.get("/api/settings").json()["otlp_export"] in (None, "")
        r = client.patch("/api/settings", json={"otlp_export": "http://[::1]:4318"})
        assert r.status_code == 200
