"""Idempotency keys: the store protocol, request fingerprints and the outcomes of a lookup
(new / replay / in progress / mismatch), matched exhaustively by the HTTP edge."""

from recoup.idempotency.keys import (
    DEFAULT_LOCK_TIMEOUT,
    DEFAULT_RETENTION,
    KEY_HEADER_PATTERN,
    KEY_PATTERN,
    KEY_RULE,
    IdempotencyStore,
    InProgress,
    Mismatch,
    New,
    Outcome,
    Replay,
    canonical_json,
    derived_id,
    fingerprint,
    fingerprint_parsed,
    operation_key,
    parse_key,
)

__all__ = [
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
