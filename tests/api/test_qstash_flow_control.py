"""`Upstash-Flow-Control-Key` / `-Value` read as QStash documents them (pure): parallelism and
rate in any order, the period one second unless given, every malformed value refused naming
the header."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.datastructures import Headers

from recoup.api.problems import ApiProblem
from recoup.api.qstash.flow_control import FlowControl, flow_control, flow_control_value

KEY = "upstash-flow-control-key"
VALUE = "upstash-flow-control-value"


def read(value: str | None, key: str | None = "acct-1") -> FlowControl | None:
    headers = {k: v for k, v in ((KEY, key), (VALUE, value)) if v is not None}
    return flow_control(headers)


def test_the_sdks_value_is_read_with_a_default_period() -> None:
    assert read("parallelism=2, rate=3, period=1s") == FlowControl(
        "acct-1", 2, 3, timedelta(seconds=1)
    )
    assert read("rate=10,period=5m") == FlowControl("acct-1", None, 10, timedelta(minutes=5))
    assert read("parallelism=1") == FlowControl("acct-1", 1, None, timedelta(seconds=1))
    assert flow_control({}) is None


@pytest.mark.parametrize(
    ("value", "key", "field"),
    [
        ("rate=0", "acct-1", "Upstash-Flow-Control-Value"),
        ("rate=3, rate=4", "acct-1", "Upstash-Flow-Control-Value"),
        ("burst=3", "acct-1", "Upstash-Flow-Control-Value"),
        ("parallelism=2, period=1s", "acct-1", "Upstash-Flow-Control-Value"),
        ("rate=3, period=1w", "acct-1", "Upstash-Flow-Control-Value"),
        ("rate=3, period=8d", "acct-1", "Upstash-Flow-Control-Value"),
        ("", "acct-1", "Upstash-Flow-Control-Value"),
        (None, "acct-1", "Upstash-Flow-Control-Value"),
        ("rate=3", None, "Upstash-Flow-Control-Key"),
        ("rate=3", "a key", "Upstash-Flow-Control-Key"),
    ],
)
def test_malformed_flow_control_is_refused_naming_the_header(
    value: str | None, key: str | None, field: str
) -> None:
    with pytest.raises(ApiProblem) as refused:
        read(value, key)
    assert refused.value.http_status == 400
    assert [e.field for e in refused.value.problem.errors] == [field]


@given(
    parallelism=st.none() | st.integers(1, 100_000),
    rate=st.none() | st.integers(1, 100_000),
    seconds=st.integers(1, 7 * 86_400),
)
def test_what_is_written_back_reads_the_same(
    parallelism: int | None, rate: int | None, seconds: int
) -> None:
    if parallelism is None and rate is None:
        return
    period = timedelta(seconds=seconds) if rate is not None else timedelta(seconds=1)
    found = FlowControl("k", parallelism, rate, period)
    assert read(flow_control_value(found), "k") == found


def test_a_message_under_two_keys_is_refused_naming_the_header() -> None:
    # One key per message, as QStash has it: a second key is refused, never dropped unseen.
    for name, values in (
        (KEY, [("acct-1", "rate=3"), ("acct-2", None)]),
        (VALUE, [("acct-1", "rate=3"), (None, "parallelism=2")]),
    ):
        raw = [
            (header.encode(), value.encode())
            for key, value_ in values
            for header, value in ((KEY, key), (VALUE, value_))
            if value is not None
        ]
        with pytest.raises(ApiProblem) as refused:
            flow_control(Headers(raw=raw))
        assert refused.value.http_status == 400
        [error] = refused.value.problem.errors
        assert error.field.lower() == name
        assert "one per message" in error.message
    both = Headers(raw=[(KEY.encode(), b"acct-1"), (VALUE.encode(), b"rate=3, parallelism=2")])
    assert flow_control(both) == FlowControl("acct-1", 2, 3, timedelta(seconds=1))
