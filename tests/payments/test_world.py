"""The simulated world's odds: the packaged worlds keep to the figures they cite, the pure
`success_probability` behaves, and the gateway draws its retries from it."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recoup.errors import ConfigError, InvalidInput
from recoup.payments import ChargeStatus, Scenario, SimulatedGateway
from recoup.payments.wire import parse_scenario_file
from recoup.payments.world import (
    WORLDS,
    Segment,
    TryHistory,
    packaged_world,
    parse_world,
    success_probability,
)
from recoup.timekeeping.clock import VirtualClock
from tests.payments.conftest import in_process_client, make_request

NEW_YORK = ZoneInfo("America/New_York")
FAILED = datetime(2026, 10, 5, 14, tzinfo=NEW_YORK)  # a Monday
NSF_US = Segment(decline_code="insufficient_funds", network="visa", country="US")
SOFT = ["insufficient_funds", "generic_decline", "do_not_honor", "processing_error", "xyz"]
HARD = ["stolen_card", "lost_card", "pickup_card", "expired_card", "incorrect_cvc"]
COUNTRIES = ["US", "GB", "DE", "JP", "FR", "IN", None]


def _odds(p: float) -> float:
    return p / (1 - p)


def _p(world: str, segment: Segment, local: datetime, retries: int = 0) -> float:
    history = TryHistory(first_failed_at=FAILED, retries_before=retries)
    return success_probability(packaged_world(world), segment, local, history)


def test_the_calibrated_hours_carry_recurlys_figures_as_an_odds_ratio() -> None:
    # Recurly: about 18 % declined in peak business hours, 25–28 % at 1–4 am local.
    peak = _p("calibrated", NSF_US, datetime(2026, 10, 7, 10, tzinfo=NEW_YORK))
    night = _p("calibrated", NSF_US, datetime(2026, 10, 7, 3, tzinfo=NEW_YORK))
    assert _odds(peak) / _odds(night) == pytest.approx((0.82 / 0.18) / (0.72 / 0.28))


def test_us_paydays_lift_insufficient_funds_only() -> None:
    on_payday = datetime(2026, 10, 15, 10, tzinfo=NEW_YORK)  # a Thursday
    week_before = datetime(2026, 10, 8, 10, tzinfo=NEW_YORK)  # the Thursday before
    assert _p("calibrated", NSF_US, on_payday) > 1.8 * _p("calibrated", NSF_US, week_before)
    dnh = Segment(decline_code="do_not_honor", country="US")
    # Only the age step (7 days: × 1.1) differs between the two days.
    ratio = _odds(_p("calibrated", dnh, on_payday)) / _odds(_p("calibrated", dnh, week_before))
    assert ratio == pytest.approx(1.1)


@pytest.mark.parametrize(
    ("country", "zone", "payday", "day_before"),
    [
        ("GB", "Europe/London", datetime(2026, 10, 30, 11), datetime(2026, 10, 29, 11)),
        ("DE", "Europe/Berlin", datetime(2026, 10, 30, 11), datetime(2026, 10, 29, 11)),
        ("JP", "Asia/Tokyo", datetime(2026, 11, 25, 11), datetime(2026, 11, 24, 11)),
    ],
)
def test_each_country_has_its_own_payday(country, zone, payday, day_before) -> None:
    segment = Segment(decline_code="insufficient_funds", country=country)
    tz = ZoneInfo(zone)
    on, before = payday.replace(tzinfo=tz), day_before.replace(tzinfo=tz)
    # × 2.2 on the payday; the GB and DE one is a Friday (× 0.95 against Thursday's 1.05).
    assert _odds(_p("calibrated", segment, on)) / _odds(_p("calibrated", segment, before)) > 1.9


def test_the_night_owl_world_is_best_far_from_10_00() -> None:
    day = datetime(2026, 10, 7, tzinfo=NEW_YORK)
    by_hour = [_p("night-owl", NSF_US, day.replace(hour=h)) for h in range(24)]
    best = by_hour.index(max(by_hour))
    assert abs(best - 10) >= 6
    assert by_hour[10] == min(by_hour)


@given(
    st.sampled_from(SOFT),
    st.sampled_from(COUNTRIES),
    st.integers(0, 24 * 60),
    st.integers(0, 6),
)
def test_the_flat_world_has_no_time_structure(code, country, hours, retries) -> None:
    segment = Segment(decline_code=code, country=country)
    local = FAILED + timedelta(hours=hours)
    assert not packaged_world("flat").has_time_structure
    later = FAILED + timedelta(days=1)
    assert _p("flat", segment, local, retries) == _p("flat", segment, later, retries)


@given(
    st.sampled_from(WORLDS),
    st.sampled_from(HARD),
    st.sampled_from(COUNTRIES),
    st.integers(0, 60 * 24),
)
def test_hard_declines_never_recover_by_timing(world, code, country, hours) -> None:
    segment = Segment(decline_code=code, country=country)
    assert _p(world, segment, FAILED + timedelta(hours=hours)) == 0.0


@given(
    st.sampled_from(WORLDS),
    st.sampled_from(SOFT),
    st.sampled_from(["visa", "mastercard", "amex", None]),
    st.sampled_from(COUNTRIES),
    st.integers(0, 60 * 24),
    st.integers(0, 20),
)
def test_a_soft_decline_has_a_probability_strictly_between_0_and_1(
    world, code, network, country, hours, retries
) -> None:
    segment = Segment(decline_code=code, network=network, country=country)
    p = _p(world, segment, FAILED + timedelta(hours=hours), retries)
    assert 0.0 < p < 1.0
    assert not math.isnan(p)


def test_an_advice_code_that_says_never_makes_a_soft_decline_hard() -> None:
    dnh = Segment(decline_code="do_not_honor", country="US", advice_codes=("do_not_try_again",))
    assert _p("calibrated", dnh, datetime(2026, 10, 15, 10, tzinfo=NEW_YORK)) == 0.0


def test_each_retry_already_made_lowers_the_odds() -> None:
    local = datetime(2026, 10, 7, 10, tzinfo=NEW_YORK)
    odds = [_odds(_p("calibrated", NSF_US, local, n)) for n in range(3)]
    assert odds[1] / odds[0] == pytest.approx(0.85)
    assert odds[2] / odds[1] == pytest.approx(0.85)


def test_a_segment_rule_matches_its_network() -> None:
    local = datetime(2026, 10, 7, 10, tzinfo=NEW_YORK)
    amex = Segment(decline_code="insufficient_funds", network="amex", country="US")
    ratio = _odds(_p("calibrated", amex, local)) / _odds(_p("calibrated", NSF_US, local))
    assert ratio == pytest.approx(1.15)


def test_a_segment_may_bring_its_own_hours() -> None:
    rates = [0.5] * 24
    rates[20] = 0.1
    world = parse_world(
        '[base]\ndefault = 0.2\n[[segments]]\ncountry = "JP"\n'
        f"[segments.hours]\ndecline_rates = {rates}\n"
    )
    tokyo = ZoneInfo("Asia/Tokyo")
    history = TryHistory(first_failed_at=FAILED)
    jp = Segment(decline_code="generic_decline", country="JP")
    at_20 = success_probability(world, jp, datetime(2026, 10, 7, 20, tzinfo=tokyo), history)
    at_10 = success_probability(world, jp, datetime(2026, 10, 7, 10, tzinfo=tokyo), history)
    assert at_20 == pytest.approx(0.2)
    assert at_10 < 0.05
    us = Segment(decline_code="generic_decline", country="US")
    assert success_probability(world, us, datetime(2026, 10, 7, 10, tzinfo=tokyo), history) == (
        pytest.approx(0.2)
    )


def test_a_naive_local_time_is_refused() -> None:
    with pytest.raises(InvalidInput) as caught:
        success_probability(
            packaged_world(), NSF_US, datetime(2026, 10, 7, 10), TryHistory(first_failed_at=FAILED)
        )
    assert caught.value.field == "local_datetime"


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("[hours]\ndecline_rates = [0.2]", "hours.decline_rates"),  # 24 needed
        ("[base]\ndefault = 1.5", "base.default"),  # a probability
        ("[weekdays]\nodds = [1, 1, 1, 1, 1, 1, -1]", "weekdays.odds[6]"),
        ("[age]\nodds = [[7, 1.0], [3, 1.1]]", "age.odds[1]"),  # increasing days
        ("[[segments]]\nplanet = 'mars'", "segments[0].planet"),
        ("colour = 'blue'", "colour"),
    ],
)
def test_a_bad_world_names_the_field(text: str, field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_world(text)
    assert caught.value.field == field


def test_a_scenario_file_names_a_packaged_world_or_holds_one() -> None:
    assert parse_scenario_file('world = "night-owl"').world == packaged_world("night-owl")
    inline = parse_scenario_file('[world]\nname = "mine"\n[world.base]\ndefault = 0.3\n')
    assert inline.world is not None and inline.world.name == "mine"
    assert parse_scenario_file("").world is None
    with pytest.raises(ConfigError) as caught:
        parse_scenario_file("[world.hours]\ndecline_rates = [2]\n")
    assert caught.value.field == "world.hours.decline_rates"
    with pytest.raises(ConfigError) as caught:
        parse_scenario_file('world = "mars"')
    assert caught.value.field == "world"


# The gateway.


def _timed(world: str, code: str = "insufficient_funds") -> SimulatedGateway:
    gateway = SimulatedGateway(
        VirtualClock(FAILED), seed=3, sleep=lambda _: None, world=packaged_world(world)
    )
    gateway.add_card(
        "card_1",
        Scenario(
            decline_code=code,
            world_odds=True,
            timezone="America/New_York",
            country="US",
            network="visa",
        ),
    )
    return gateway


def _rate(gateway: SimulatedGateway, local_hour: int, invoices: int = 600) -> float:
    succeeded = 0
    for i in range(invoices):
        first = make_request(f"charge:inv_{i}:0", invoice_id=f"inv_{i}", card="card_1", at=FAILED)
        assert gateway.charge(first).status is not ChargeStatus.SUCCEEDED  # the failure
        at = datetime(2026, 10, 7, local_hour, tzinfo=NEW_YORK).astimezone(UTC)
        retry = make_request(f"charge:inv_{i}:1", invoice_id=f"inv_{i}", card="card_1", at=at)
        succeeded += gateway.charge(retry).status is ChargeStatus.SUCCEEDED
    return succeeded / invoices


def test_the_gateway_draws_retries_from_the_world() -> None:
    expected = _p("calibrated", NSF_US, datetime(2026, 10, 7, 10, tzinfo=NEW_YORK))
    assert _rate(_timed("calibrated"), 10) == pytest.approx(expected, abs=0.05)
    # Recurly's night: fewer retries succeed at 03:00 than at 10:00, over the same invoices.
    assert _rate(_timed("calibrated"), 3) < _rate(_timed("calibrated"), 10)


def test_a_hard_decline_with_world_odds_never_succeeds() -> None:
    assert _rate(_timed("calibrated", "stolen_card"), 10, invoices=100) == 0.0


def test_the_same_seed_gives_the_same_answers() -> None:
    assert _rate(_timed("calibrated"), 10, 200) == _rate(_timed("calibrated"), 10, 200)


def test_the_server_says_which_world_it_follows() -> None:
    with in_process_client(_timed("flat")) as client:
        body = client.get("/world").json()
    assert body["name"] == "flat"
    assert body["time_structure"] is False
