"""Every studio page rendered with hostile names, texts and metadata (issue 30, item 1): the
HTML is parsed with a real parser, and no text a user stored becomes an attribute or an element;
the dataset page's case form round-trips metadata with quotes in it (it used to end the
attribute at the first double quote of the JSON)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from simeval.service import Service
from simeval.web.app import create_app
from simeval.web.security import CSRF_FIELD

REF = "The capital of France is Paris."
Q = "What is the capital of France?"
# a quote of each kind, tags and event handlers: what an attacker writes into stored text
HOSTILE = (
    "\" autofocus onfocus=alert(1) x=\" ' onmouseover=alert(2) '><img src=x onerror=alert(3)>&amp;"
)
META = {"x": HOSTILE, "note": 'say "hi" & <b>bye</b>', "n": 3}


class Page(HTMLParser):
    """The start tags of a page and their attributes."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    handle_startendtag = handle_starttag


def parsed(html: str) -> Page:
    page = Page()
    page.feed(html)
    page.close()
    return page


@pytest.fixture
def client(new_sqlite: Callable[..., str]) -> Iterator[TestClient]:
    db = Path(new_sqlite("hostile.db"))
    with Service(db) as svc:
        svc.create_eval("capital", [REF, HOSTILE])
        svc.test_eval("capital", Q, REF)
        svc.activate_eval("capital")
        for i in range(2):
            svc.capture(
                f"{Q} {HOSTILE}", f"{REF} {HOSTILE}", conversation_id=f"c-{i}", metadata=META
            )
        case = {"id": "case-1", "input": HOSTILE, "references": [HOSTILE], "metadata": META}
        svc.create_dataset("golden", [case])
    app = create_app(db=str(db))
    with TestClient(app, base_url="http://127.0.0.1:8000", raise_server_exceptions=False) as c:
        yield c


def _pages(c: TestClient) -> list[str]:
    urls = ["/dashboard", "/results", "/review", "/conversations", "/datasets", "/runs"]
    urls += ["/alerts", "/settings", "/compare", "/evals/new", "/run-groups"]
    urls += ["/evals/capital", "/datasets/golden", "/conversations/c-0"]
    urls += [f"/results?q={quote(HOSTILE)}", f"/conversations?q={quote(HOSTILE)}"]
    listing = c.get("/api/results").json()
    rows = listing["results"] if isinstance(listing, dict) else listing
    for row in rows[:2]:
        urls.append(f"/results/{row['id']}")
        urls.append(f"/captures/{row['capture_id']}")
    return urls


def test_no_stored_text_becomes_markup_on_any_page(client: TestClient) -> None:
    seen = 0
    for url in _pages(client):
        r = client.get(url)
        assert r.status_code == 200, (url, r.status_code, r.text[:300])
        page = parsed(r.text)
        for tag, attrs in page.tags:
            # an event handler, or the "x" the hostile text opens to swallow the rest
            injected = [a for a in attrs if a.startswith("on") or a in ("x", "'")]
            assert not injected, (url, tag, attrs)
            assert not (tag == "img" and attrs.get("src") == "x"), (url, attrs)
        seen += any(s in r.text for s in ("&#34; autofocus", "&quot; autofocus"))
    assert seen  # the hostile text is on the pages, escaped


def test_the_case_form_round_trips_metadata_with_quotes(client: TestClient) -> None:
    r = client.get("/datasets/golden")
    forms = [a for t, a in parsed(r.text).tags if t == "input" and a.get("name") == "metadata"]
    assert forms and json.loads(forms[0]["value"] or "") == META
    # saved as the form holds it: the metadata stays what it was
    csrf = next(
        a["value"] for t, a in parsed(r.text).tags if t == "input" and a.get("name") == CSRF_FIELD
    )
    version = next(
        a["value"] for t, a in parsed(r.text).tags if t == "input" and a.get("name") == "version"
    )
    form = {
        CSRF_FIELD: csrf,
        "case": "case-1",
        "version": version,
        "input": HOSTILE + " (edited)",
        "references": HOSTILE,
        "metadata": forms[0]["value"],
    }
    saved = client.post("/datasets/golden/edit", data=form, follow_redirects=False)
    assert saved.status_code in (302, 303), saved.text[:300]
    case = client.get("/api/datasets/golden").json()["cases"][0]
    assert case["metadata"] == META
    assert case["input"] == HOSTILE + " (edited)"
    assert re.search(r"&#34;|&quot;", client.get("/datasets/golden").text)
