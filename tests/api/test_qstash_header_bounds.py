"""`Upstash-Forward-*` headers are bounded as `target.headers` are (issue 24: 100,000 characters
were accepted), on both backends: a 400 naming the header, nothing stored."""

from __future__ import annotations

import httpx
import pytest

from tests.api.qstash_support import Served, served  # noqa: F401 (the fixture)

URL = "https://example.com/hook"


@pytest.mark.parametrize(
    ("name", "value"),
    [("Upstash-Forward-X-Big", "v" * 100_000), ("Upstash-Forward-X-" + "n" * 300, "v")],
)
def test_an_oversized_forwarded_header_is_a_400(served: Served, name: str, value: str) -> None:  # noqa: F811
    answer = httpx.post(
        f"{served.url}/qstash/v2/publish/{URL}",
        headers={"Authorization": f"Bearer {served.token}", name: value},
        content=b"x",
        timeout=30,
    )
    assert answer.status_code == 400, answer.text
    assert answer.headers["content-type"].startswith("application/problem+json")
    assert "at most" in answer.text and len(answer.text) < 5_000
    assert served.scheduler.list_jobs(tenant=served.tenant).jobs == []
