"""W3C Trace Context checked as the spec reads (w3.org/TR/trace-context): what a producer may
send is kept as sent, anything else is refused naming the header; property: every well-formed
traceparent of version 00 is kept, with its ids and sampled flag."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recoup.errors import InvalidInput
from recoup.jobs.trace_context import TraceContext, trace_context

PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_a_traceparent_and_tracestate_are_kept_as_sent() -> None:
    found = trace_context(PARENT, "rojo=00f067aa0ba902b7, congo=t61rcWkgMzE")
    assert found == TraceContext(PARENT, "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE")
    assert (found.trace_id, found.parent_id, found.sampled) == (
        "4bf92f3577b34da6a3ce929d0e0e4736",
        "00f067aa0ba902b7",
        True,
    )
    assert found.headers() == {"traceparent": PARENT, "tracestate": found.tracestate}
    assert trace_context(None) is None
    assert trace_context(PARENT, "") == TraceContext(PARENT, None)
    # A later version may add fields; they are kept.
    assert trace_context(PARENT.replace("00-", "cc-", 1) + "-what").traceparent.endswith("-what")


@pytest.mark.parametrize(
    ("traceparent", "tracestate", "field"),
    [
        ("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", None, "traceparent"),
        ("00-00000000000000000000000000000000-00f067aa0ba902b7-01", None, "traceparent"),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", None, "traceparent"),
        ("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", None, "traceparent"),
        (PARENT + "-extra", None, "traceparent"),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", None, "traceparent"),
        ("not a traceparent", None, "traceparent"),
        (None, "rojo=1", "tracestate"),
        (PARENT, "Rojo=1", "tracestate"),
        (PARENT, "rojo=1,rojo=2", "tracestate"),
        (PARENT, "rojo", "tracestate"),
        (PARENT, "rojo=a,b", "tracestate"),
        (PARENT, ",".join(f"k{n}=v" for n in range(33)), "tracestate"),
        (PARENT, "k=" + "v" * 600, "tracestate"),
    ],
)
def test_a_malformed_trace_context_is_refused_naming_the_header(
    traceparent: str | None, tracestate: str | None, field: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        trace_context(traceparent, tracestate)
    assert refused.value.field == field


HEX = "0123456789abcdef"


@given(
    trace_id=st.text(HEX, min_size=32, max_size=32).filter(lambda t: set(t) != {"0"}),
    parent_id=st.text(HEX, min_size=16, max_size=16).filter(lambda t: set(t) != {"0"}),
    flags=st.integers(0, 255),
)
def test_every_well_formed_traceparent_is_kept(trace_id: str, parent_id: str, flags: int) -> None:
    given_parent = f"00-{trace_id}-{parent_id}-{flags:02x}"
    found = trace_context(given_parent)
    assert found is not None
    assert (found.traceparent, found.trace_id, found.parent_id) == (
        given_parent,
        trace_id,
        parent_id,
    )
    assert found.sampled is bool(flags & 1)
