"""Idempotency keys: header parsing and fingerprints (the key store, on both backends, is in
tests/storage/test_api_tables.py)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recoup.errors import InvalidInput
from recoup.idempotency import fingerprint, fingerprint_parsed, parse_key

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@pytest.mark.parametrize(
    ("header", "key"),
    [
        ("8e03978e-40d5-43e8-bc93-6894a57f9324", "8e03978e-40d5-43e8-bc93-6894a57f9324"),
        ('"8e03978e-40d5-43e8-bc93-6894a57f9324"', "8e03978e-40d5-43e8-bc93-6894a57f9324"),
        ("  padded  ", "padded"),  # surrounding whitespace is not part of a field value
        ("a", "a"),
        ("x" * 255, "x" * 255),
    ],
)
def test_it_accepts_bare_tokens_and_quoted_strings(header: str, key: str) -> None:
    assert parse_key(header) == key


@pytest.mark.parametrize(
    "header",
    [
        "",  # empty
        '""',  # an empty sf-string
        "x" * 256,  # longer than Stripe's 255
        "two words",  # a space
        '"unterminated',  # a quote inside the key
        "back\\slash",
        "caf\u00e9",  # not ASCII
    ],
)
def test_it_refuses_malformed_keys_naming_the_header(header: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_key(header)
    assert caught.value.field == "Idempotency-Key"


def test_the_fingerprint_ignores_key_order_and_whitespace() -> None:
    a = fingerprint("POST", "/v1/jobs", b'{"a": 1, "b": {"c": [1, 2], "d": null}}')
    b = fingerprint("post", "/v1/jobs", b'{"b":{"d":null,"c":[1,2]},"a":1}')
    assert a == b


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/v1/jobs", b'{"a": 2}'),  # another value
        ("POST", "/v1/jobs", b'{"a": [1]}'),  # another type
        ("POST", "/v1/schedules", b'{"a": 1}'),  # another path
        ("PUT", "/v1/jobs", b'{"a": 1}'),  # another method
        ("POST", "/v1/jobs", b'{"a": 1, "b": null}'),  # an extra field, even a null one
    ],
)
def test_the_fingerprint_tells_requests_apart(method: str, path: str, body: bytes) -> None:
    assert fingerprint(method, path, body) != fingerprint("POST", "/v1/jobs", b'{"a": 1}')


def test_a_body_that_is_not_json_is_fingerprinted_as_bytes() -> None:
    assert fingerprint("POST", "/p", b"{not json") == fingerprint("POST", "/p", b"{not json")
    assert fingerprint("POST", "/p", b"{not json") != fingerprint("POST", "/p", b"{not json ")


@given(value=JSON_VALUES, indent=st.sampled_from([None, 0, 2]))
def test_a_parsed_body_has_the_fingerprint_of_its_bytes(value: object, indent: int | None) -> None:
    # What the fast paths give (`recoup.api.fast_posts`): the body parsed once, for the model
    # and the fingerprint; a retry through the declared route must find the same key.
    body = json.dumps(value, indent=indent).encode()
    parsed = json.loads(body)
    if any(isinstance(leaf, float) and math.isinf(leaf) for leaf in _leaves(parsed)):
        # No canonical JSON for an infinity: `fingerprint` hashes such a body as its bytes, so
        # the parsed form must refuse (the fast paths then leave the request to the route).
        with pytest.raises(ValueError):
            fingerprint_parsed("POST", "/v1/jobs", parsed)
        return
    assert fingerprint_parsed("POST", "/v1/jobs", parsed) == fingerprint("POST", "/v1/jobs", body)


def _leaves(value: object) -> list[object]:
    if isinstance(value, list):
        return [leaf for item in value for leaf in _leaves(item)]
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _leaves(item)]
    return [value]
