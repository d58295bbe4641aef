"""The per-tenant token buckets on their own (a stepped clock, no server): what a limit spec
means, the bound every sequence of requests respects, and the wait a refusal announces."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recoup.api import rate_limits
from recoup.api.rate_limits import RateLimit, TenantRateLimiter, retry_after
from recoup.cli import main
from recoup.errors import InvalidInput


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("spec", "rate", "burst"),
    [
        ("50/s", 50.0, 50.0),
        (" 600 / min ", 10.0, 600.0),
        ("3600/h", 1.0, 3600.0),
        ("0.5/s", 0.5, 1.0),  # a burst holds one request at least
        ("2/sec", 2.0, 2.0),
    ],
)
def test_a_limit_is_n_per_unit_with_a_burst_of_one_units_worth(
    spec: str, rate: float, burst: float
) -> None:
    assert RateLimit.parse(spec) == RateLimit(rate=rate, burst=burst)


@pytest.mark.parametrize("spec", ["off", "OFF", "", "none", "0"])
def test_off_is_no_limit(spec: str) -> None:
    assert RateLimit.parse(spec) is None


@pytest.mark.parametrize("spec", ["fast", "50", "0/s", "-1/s", "5/week", "1e3/s", "/s", "5/"])
def test_a_bad_limit_is_invalid_input_naming_the_option(spec: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        RateLimit.parse(spec)
    assert caught.value.field == "--rate-limit" and "N/s" in caught.value.allowed


def test_retry_after_is_whole_seconds_and_never_zero() -> None:
    assert [retry_after(w) for w in (0.001, 0.5, 1.0, 1.01, 59.2)] == ["1", "1", "1", "2", "60"]


@given(
    rate=st.floats(0.1, 100),
    count=st.integers(1, 20),
    gaps=st.lists(st.floats(0, 2), min_size=1, max_size=80),
)
def test_no_window_lets_more_through_than_the_burst_and_the_refill(
    rate: float, count: int, gaps: list[float]
) -> None:
    limit = RateLimit(rate=rate, burst=float(count))
    clock = Clock()
    limiter = TenantRateLimiter(limit, monotonic=clock)
    accepted: list[float] = []
    for gap in gaps:
        clock.now += gap
        if limiter.wait("t") == 0.0:
            accepted.append(clock.now)
    for i, start in enumerate(accepted):
        for j in range(i, len(accepted)):
            window = accepted[j] - start
            assert j - i + 1 <= limit.burst + rate * window + 1e-6


@given(rate=st.floats(0.1, 100), burst=st.integers(1, 10), spent=st.integers(0, 30))
def test_a_refusal_says_exactly_how_long_to_wait(rate: float, burst: int, spent: int) -> None:
    clock = Clock()
    limiter = TenantRateLimiter(RateLimit(rate=rate, burst=float(burst)), monotonic=clock)
    for _ in range(burst):
        assert limiter.wait("t") == 0.0
    for _ in range(spent):  # refusals take nothing
        assert limiter.wait("t") > 0
    wait = limiter.wait("t")
    assert wait == pytest.approx(1 / rate)
    clock.now += wait * 0.99
    assert limiter.wait("t") > 0
    clock.now += wait * 0.02
    assert limiter.wait("t") == 0.0


def test_tenants_have_buckets_of_their_own_and_full_ones_are_forgotten(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(rate_limits, "PRUNE_AT", 2)
    clock = Clock()
    limiter = TenantRateLimiter(RateLimit(rate=1.0, burst=1.0), monotonic=clock)
    assert [limiter.wait(t) for t in ("a", "b", "a")] == [0.0, 0.0, 1.0]
    clock.now += 0.5
    assert limiter.wait("c") == 0.0  # a third bucket: the full ones go (none is full yet)
    assert limiter.wait("a") == pytest.approx(0.5)  # a's debt is kept
    clock.now += 5
    assert limiter.wait("d") == 0.0  # every other bucket is full by now: dropped, no change
    assert [limiter.wait(t) for t in ("a", "b", "c")] == [0.0, 0.0, 0.0]
    assert limiter.wait("a") > 0


def test_serve_refuses_a_bad_limit_before_opening_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "never.db"
    code = main(["serve", "--db", f"sqlite:///{db}", "--rate-limit", "lots"])
    err = capsys.readouterr().err
    assert code == 2 and "--rate-limit" in err and err.count("\n") == 1
    assert not db.exists()


def test_serve_reads_the_limit_from_the_environment(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RECOUP_RATE_LIMIT", "9/fortnight")
    db = tmp_path / "never.db"
    assert main(["serve", "--db", f"sqlite:///{db}"]) == 2
    assert "'9/fortnight'" in capsys.readouterr().err
    assert not db.exists()
