"""The JSON and TOML shapes of requests, charges, scenarios and faults."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recoup.errors import ConfigError, InvalidInput
from recoup.payments import Charge, ChargeStatus, Combine, Fault, FaultKind, Scenario
from recoup.payments.wire import (
    charge_from_json,
    charge_request_from_json,
    charge_request_to_json,
    charge_to_json,
    fault_from_json,
    fault_to_json,
    parse_scenario_file,
    scenario_from_json,
    scenario_to_json,
)
from tests.payments.conftest import START, make_request

SCENARIO_FILE = """
[cards.card_nsf]
decline_code = "insufficient_funds"
clears_after_hours = 72

[cards.card_payday]
decline_code = "insufficient_funds"
paydays = [1, 15]
payday_dates = [2026-12-24]
window_days = 2
timezone = "America/New_York"
combine = "all"

[cards.card_dnh]
decline_code = "do_not_honor"
advice_code = "do_not_try_again"

[cards.card_expired]
decline_code = "expired_card"
clears_on_update = true

[[faults]]
kind = "unavailable"
gateway = "stripe"
start = 2026-12-01T02:00:00Z
end = 2026-12-01T04:00:00+00:00
"""


def test_the_documented_scenario_file_loads() -> None:
    loaded = parse_scenario_file(SCENARIO_FILE)
    assert loaded.cards["card_nsf"] == Scenario.soft(clears_after=timedelta(hours=72))
    payday = loaded.cards["card_payday"]
    assert (payday.paydays, payday.payday_dates) == ((1, 15), (date(2026, 12, 24),))
    assert (payday.window_days, payday.combine) == (2, Combine.ALL)
    assert loaded.cards["card_dnh"].status is ChargeStatus.FAILED_TERMINAL
    assert loaded.cards["card_expired"] == Scenario.expired()
    assert loaded.faults == (
        Fault(
            kind=FaultKind.UNAVAILABLE,
            gateway="stripe",
            start=datetime(2026, 12, 1, 2, tzinfo=UTC),
            end=datetime(2026, 12, 1, 4, tzinfo=UTC),
        ),
    )


def test_the_cli_docstring_example_is_this_format() -> None:
    import recoup.cli.gateway

    doc = recoup.cli.gateway.__doc__ or ""
    example = "\n".join(
        line.split("#")[0].removeprefix("    ")
        for line in doc.splitlines()
        if line.startswith("    ") and not line.startswith("    recoup ")
    )
    loaded = parse_scenario_file(example)
    assert sorted(loaded.cards) == [
        "card_dnh",
        "card_expired",
        "card_nsf",
        "card_payday",
        "card_stolen",
        "card_timed",
    ]
    assert len(loaded.faults) == 1
    assert loaded.world is not None and loaded.world.name == "calibrated"
    assert loaded.cards["card_timed"].world_odds


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("[cards.x]\nclears_after_hours = 1", "cards.x.decline_code"),
        ('[cards.x]\ndecline_code = "a"\nwindow_days = 40', "cards.x.window_days"),
        ('[cards.x]\ndecline_code = "a"\nwindow_days = "2"', "cards.x.window_days"),
        ('[cards.x]\ndecline_code = "a"\npaydays = [0]', "cards.x.paydays"),
        ('[cards.x]\ndecline_code = "a"\nclears_after_hours = -1', "cards.x.clears_after_hours"),
        ('[cards.x]\ndecline_code = "a"\ntimezone = "Nowhere/City"', "cards.x.timezone"),
        ('[cards.x]\ndecline_code = "a"\ncolour = "red"', "cards.x.colour"),
        ('[[faults]]\nkind = "explode"', "faults.0.kind"),
        ('[[faults]]\nkind = "unavailable"\nstart = 2026-12-01T02:00:00', "faults.0.start"),
        (
            '[[faults]]\nkind = "unavailable"\nstart = 2026-12-02T00:00:00Z\n'
            "end = 2026-12-01T00:00:00Z",
            "faults.0.end",
        ),
        ('[[faults]]\nkind = "slow"', "faults.0.delay_seconds"),
        ("[cards", "toml"),
        ('surprise = "yes"', "surprise"),
    ],
)
def test_a_bad_scenario_file_names_the_dotted_path(text: str, field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_scenario_file(text)
    assert caught.value.field == field
    assert "\n" not in str(caught.value)  # the CLI prints it as one line


def test_a_charge_request_takes_its_key_from_the_header_or_the_body() -> None:
    body = charge_request_to_json(make_request(at=START))
    assert charge_request_from_json(body) == make_request(at=START)
    del body["idempotency_key"]
    assert charge_request_from_json(body, header_key="charge:inv_1:1") == make_request(at=START)
    with pytest.raises(InvalidInput, match="Idempotency-Key"):
        charge_request_from_json(body)
    body["idempotency_key"] = "other"
    with pytest.raises(InvalidInput, match="header"):
        charge_request_from_json(body, header_key="charge:inv_1:1")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"amount": 19.99}, "amount"),  # minor units are integers
        ({"amount": "1999"}, "amount"),
        ({"amount": True}, "amount"),
        ({"amount": 0}, "amount"),
        ({"currency": "dollars"}, "currency"),
        ({"at": "2026-12-01T10:00:00"}, "at"),  # no offset
        ({"at": 1_700_000_000}, "at"),  # not a Unix timestamp either
        ({"at": "1900-01-01T00:00:00Z"}, "at"),
        ({"tip": 5}, "tip"),
    ],
)
def test_a_bad_charge_body_names_its_field(change: dict[str, object], field: str) -> None:
    body = {**charge_request_to_json(make_request()), **change}
    with pytest.raises(InvalidInput) as caught:
        charge_request_from_json(body)
    assert caught.value.field == field


def test_a_body_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(InvalidInput) as caught:
        charge_request_from_json([1, 2])
    assert caught.value.field == "body"


def test_charges_round_trip() -> None:
    charge = Charge(
        id="ch_1",
        idempotency_key="k",
        status=ChargeStatus.FAILED_TERMINAL,
        amount=5,
        currency="eur",
        created_at=START,
        decline_code="lost_card",
    )
    assert charge_from_json(charge_to_json(charge)) == charge


scenarios = st.builds(
    Scenario,
    decline_code=st.sampled_from(["insufficient_funds", "stolen_card", "expired_card"]),
    advice_code=st.sampled_from([None, "do_not_try_again", "24"]),
    clears_after=st.none() | st.integers(1, 10_000).map(lambda m: timedelta(minutes=m)),
    paydays=st.lists(st.integers(1, 31), max_size=3).map(tuple),
    payday_dates=st.lists(st.dates(date(2026, 1, 1), date(2030, 1, 1)), max_size=2).map(tuple),
    window_days=st.integers(0, 27),
    timezone=st.sampled_from(["UTC", "Europe/Paris"]),
    clears_on_update=st.booleans(),
    combine=st.sampled_from(list(Combine)),
    probability=st.floats(0.01, 1.0),
)


@given(scenario=scenarios)
def test_scenarios_round_trip_through_json(scenario: Scenario) -> None:
    assert scenario_from_json(scenario_to_json(scenario)) == scenario


@given(
    kind=st.sampled_from(list(FaultKind)),
    times=st.none() | st.integers(1, 5),
    key=st.none() | st.just("k"),
    start_hours=st.none() | st.integers(0, 100),
    delay=st.floats(0.5, 10),
)
def test_faults_round_trip_through_json(
    kind: FaultKind, times: int | None, key: str | None, start_hours: int | None, delay: float
) -> None:
    start = None if start_hours is None else START + timedelta(hours=start_hours)
    fault = Fault(
        kind=kind,
        times=times,
        idempotency_key=key,
        start=start,
        end=None if start is None else start + timedelta(hours=1),
        delay_seconds=delay,
    )
    assert fault_from_json(fault_to_json(fault)) == fault
