"""/docs is Swagger UI served whole by the app itself: every script, style sheet and image the
page names is same-origin and answers, so the docs work on a server without the Internet."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from recoup.api.app import create_app
from recoup.storage import open_store
from recoup.timekeeping.clock import SystemClock
from tests.support import ServerThread

# Every URL the page loads: src= and href= attributes, and the JavaScript `url:`/`*Url:`
# settings of the Swagger UI initialiser.
_REFERENCE = re.compile(
    r"""(?:src|href)=["']([^"']+)["']|[A-Za-z]*[uU]rl["']?\s*:\s*["']([^"']+)["']"""
)


@pytest.fixture
def client(tmp_path: Path) -> Iterator[httpx.Client]:
    store = open_store(f"sqlite:///{tmp_path / 'docs.db'}")
    with (
        ServerThread(create_app(store, clock=SystemClock())) as server,
        httpx.Client(base_url=server.url, timeout=30.0) as http,  # a loaded CI machine
    ):
        yield http
    store.close()


def references(page: str) -> list[str]:
    return [a or b for a, b in _REFERENCE.findall(page)]


def test_docs_reference_only_same_origin_assets_and_each_answers(client: httpx.Client) -> None:
    page = client.get("/docs")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    found = references(page.text)
    assert "/docs/assets/swagger-ui-bundle.js" in found and "/openapi.json" in found
    for url in found:
        parts = urlsplit(url)
        assert not parts.scheme and not parts.netloc, f"{url} is not same-origin"
        assert url.startswith("/"), url
        answer = client.get(url)
        assert answer.status_code == 200, url
        assert len(answer.content) > 0, url


def test_no_cdn_is_named_anywhere_on_the_page(client: httpx.Client) -> None:
    text = client.get("/docs").text
    assert "cdn" not in text.lower() and "http://" not in text and "https://" not in text
    assert '"validatorUrl": null' in text  # no badge from validator.swagger.io either


def test_the_docs_are_not_operations_of_the_api_and_redoc_is_not_served(
    client: httpx.Client,
) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert not [p for p in paths if p.startswith("/docs")]
    assert client.get("/redoc").status_code == 404
    assert client.get("/docs/oauth2-redirect").status_code == 200
