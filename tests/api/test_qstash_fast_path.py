"""QStash's publish through its fast path (`recoup.api.qstash.messages.fast_publish`): the
declared route's answers, without a read of the token per request, on the event loop, and a
revoked token refused by the next request."""

from __future__ import annotations

import pytest

from recoup.api.fast_route import FastPathRoute
from recoup.api.qstash import messages
from recoup.timekeeping.clock import SystemClock
from tests.api.conftest import TARGET, Api
from tests.api.fast_path_probes import on_the_loop, token_reads

PUBLISH = f"/qstash/v2/publish/{TARGET}"


def test_publish_is_the_qstash_routers_one_fast_route() -> None:
    fast = [r.path for r in messages.router.routes if isinstance(r, FastPathRoute)]
    assert fast == ["/publish/{destination:path}"]


def test_a_publish_with_a_cached_token_is_answered_in_a_thread_without_reading_it(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    caller = api.tenant()
    http = api.http(caller)
    reads = token_reads(api, monkeypatch)
    assert http.post(PUBLISH, content=b"x").status_code == 201  # the token is cached now
    assert len(reads) == 1
    seen = on_the_loop(api.app.state.api.scheduler, "insert_checked", monkeypatch)
    dedup = {"Upstash-Deduplication-Id": "in_1"}
    first = http.post(PUBLISH, content=b'{"invoice":"in_1"}', headers=dedup)
    assert first.status_code == 201, first.text
    assert set(first.json()) == {"messageId"}
    again = http.post(PUBLISH, content=b'{"invoice":"in_1"}', headers=dedup)
    assert again.status_code == 201
    assert again.json() == {"messageId": first.json()["messageId"], "deduplicated": True}
    assert len(reads) == 1
    assert seen == [False, False]
    job = api.app.state.api.scheduler.get(first.json()["messageId"], tenant=caller.tenant)
    assert job.target.url == TARGET and job.target.delivery == "qstash"


def test_a_refused_publish_gets_the_declared_routes_answer(api: Api) -> None:
    http = api.http(api.tenant())
    assert http.post(PUBLISH, content=b"x").status_code == 201  # cached now
    refused = http.post(PUBLISH, content=b"x", headers={"Upstash-Retries": "many"})
    assert refused.status_code == 400
    assert refused.headers["content-type"] == "application/problem+json"
    assert refused.json()["errors"][0]["field"] == "Upstash-Retries"


def test_a_revoked_token_is_refused_by_the_next_publish_even_a_refused_one(api: Api) -> None:
    caller = api.tenant()
    http = api.http(caller)
    assert http.post(PUBLISH, content=b"x").status_code == 201  # cached now
    (token,) = api.tables.list_tokens(caller.tenant)
    assert api.tables.revoke_token(token.id, now=SystemClock().now()) is not None
    for headers in ({}, {"Upstash-Retries": "many"}):  # 401 first, as the declared route says
        refused = http.post(PUBLISH, content=b"x", headers=headers)
        assert refused.status_code == 401, refused.text
        assert refused.headers["content-type"] == "application/problem+json"
