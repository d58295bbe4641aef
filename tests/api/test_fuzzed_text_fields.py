"""Any text in any string field of `POST /v1/jobs` and `POST /v1/dunning/failures`, over real
HTTP on both backends: never a 5xx; either a 2xx or a 4xx problem+json that parses as JSON.
The text includes lone surrogates, control characters and strings past every length limit."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.api.conftest import Api
from tests.api.test_dunning_api import FAILURE
from tests.api.test_jobs_api import PROBLEM
from tests.api.test_unencodable_inputs import JOB

# Every character, surrogates (category Cs) included, which hypothesis leaves out by default.
ANY_CHARACTER = st.characters(exclude_categories=())
TEXT = st.one_of(
    st.text(ANY_CHARACTER, max_size=20),
    st.text(st.characters(max_codepoint=0x1F), max_size=20),  # control characters
    # Long: past every field's limit (the longest is 2,048), a few thousand characters.
    st.builds(
        lambda text, times: text * times,
        st.text(ANY_CHARACTER, min_size=1, max_size=3),
        st.integers(100, 3000),
    ),
)

# (path, a valid body, the dotted field the text goes into; `<key>`: a key of that dict)
FIELDS = [
    *[
        ("/v1/jobs", JOB, field)
        for field in [
            "name",
            "group",
            "target.url",
            "target.method",
            "target.headers.X-A",
            "target.headers.<key>",
            "target.body.k",
            "target.body.<key>",
        ]
    ],
    *[
        ("/v1/dunning/failures", FAILURE, field)
        for field in [
            "invoice_id",
            "customer_id",
            "currency",
            "timezone",
            "country",
            "decline_code",
            "advice_code",
            "card.fingerprint",
            "card.network",
            "gateway",
            "merchant_id",
            "charge_url",
        ]
    ],
]


def with_text(body: dict[str, Any], dotted: str, text: str) -> dict[str, Any]:
    body = copy.deepcopy(body)
    *parents, last = dotted.split(".")
    node = body
    for part in parents:
        node = node[part]
    if last == "<key>":
        node[text] = node.popitem()[1]
    else:
        node[last] = text
    return body


@pytest.mark.parametrize(("path", "body", "field"), FIELDS, ids=[f"{p}:{f}" for p, _, f in FIELDS])
def test_any_text_in_a_string_field_is_answered_cleanly(
    api: Api, path: str, body: dict[str, Any], field: str
) -> None:
    http = api.http(api.tenant())

    @settings(
        max_examples=12,  # per field and backend: 480 requests in all, a few seconds
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(text=TEXT)
    def answers_cleanly(text: str) -> None:
        # json.dumps escapes what is not ASCII (a surrogate as `\ud800`), as any client may.
        content = json.dumps(with_text(body, field, text))
        response = http.post(path, content=content, headers={"Content-Type": "application/json"})
        assert response.status_code < 500, response.text
        parsed = json.loads(response.content)  # strict UTF-8 and JSON, whatever the status
        if response.status_code >= 300:
            assert 400 <= response.status_code < 500
            assert response.headers["content-type"].startswith(PROBLEM)
            assert parsed["status"] == response.status_code

    answers_cleanly()
