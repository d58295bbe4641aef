"""The public surface of the API's packages is the intended one, and sorted."""

from __future__ import annotations

import recoup.client
import recoup.idempotency


def test_idempotency_exports() -> None:
    assert recoup.idempotency.__all__ == [
        "DEFAULT_LOCK_TIMEOUT",
        "DEFAULT_RETENTION",
        "KEY_HEADER_PATTERN",
        "KEY_PATTERN",
        "KEY_RULE",
        "IdempotencyStore",
        "InProgress",
        "Mismatch",
        "New",
        "Outcome",
        "Replay",
        "canonical_json",
        "derived_id",
        "fingerprint",
        "fingerprint_parsed",
        "operation_key",
        "parse_key",
    ]


def test_client_exports() -> None:
    exported = recoup.client.__all__
    assert exported == sorted(exported)
    assert {"Client", "ApiError", "NotFoundError", "Unprocessable"} <= set(exported)
    for name in exported:
        assert getattr(recoup.client, name).__module__ == "recoup.client"
