"""Property-based tests of the whole API from its own /openapi.json (schemathesis): no
generated request, valid or not, gets a 5xx, and every response matches the schema (status
code documented, content type, body shape). Bounded: a few examples per operation."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from tests.api.conftest import Api

MAX_EXAMPLES = 12  # per operation and mode: the suite stays within seconds
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@pytest.mark.slow
def test_generated_requests_get_no_5xx_and_match_the_schema(api: Api) -> None:
    caller = api.tenant()
    http = api.http(caller)
    # Something to find: a job and a schedule, so some generated ids and names hit.
    http.post("/v1/jobs", json={"delay_seconds": 60, "target": {"url": "http://127.0.0.1:9/"}})
    schema = schemathesis.openapi.from_dict(http.get("/openapi.json").json())
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 14
    failures: list[str] = []
    for operation in operations:
        for mode in (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE):

            @given(case=operation.as_strategy(generation_mode=mode))
            @settings(
                max_examples=MAX_EXAMPLES,
                deadline=None,
                derandomize=True,  # reproducible in CI
                suppress_health_check=list(HealthCheck),
                database=None,
            )
            def exercise(case: Any) -> None:
                case.call_and_validate(base_url=api.url, headers=caller.auth, checks=CHECKS)

            try:
                exercise()
            except Unsatisfiable:
                pass  # no parameters, so no invalid request to make (/healthz in negative mode)
            except Exception as exc:  # collect every operation's failure, not just the first
                failures.append(f"{operation.label} ({mode.value}): {exc}")
    assert not failures, "\n\n".join(failures)
