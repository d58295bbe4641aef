"""The management commands (`recoup_prune_idempotency`, `recoup_reconcile`), the durations
they read, and the app's system checks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client, override_settings
from hypothesis import given
from hypothesis import strategies as st

from recoup.contrib.django.checks import check_settings
from recoup.contrib.django.durations import format_duration, parse_duration
from recoup.contrib.django.models import ChargeRecord, IdempotencyRecord
from recoup.errors import InvalidInput
from recoup.payments import Fault, FaultKind, Scenario, SimulatedGateway
from tests.contrib_django.billing.models import Invoice

from .conftest import add_invoice, charge_body, deliver

ROOT = Path(__file__).parent.parent.parent


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def record(key: str, age: timedelta) -> None:
    # The commands read the system clock: records are aged from it.
    at = datetime.now(UTC) - age
    IdempotencyRecord.objects.create(
        key=key, fingerprint="f", created_at=at, status=200, content_type="text/plain", body=b""
    )


def test_prune_deletes_the_records_older_than_asked(database: str) -> None:
    record("old", timedelta(days=8))
    record("recent", timedelta(days=6))
    said = run("recoup_prune_idempotency", "--older-than", "7d", "--database", database)
    assert said.startswith("deleted 1 idempotency record first used before ")
    assert list(IdempotencyRecord.objects.values_list("key", flat=True)) == ["recent"]


def test_prune_keeps_a_day_by_default_and_a_dry_run_deletes_nothing(database: str) -> None:
    record("two days", timedelta(days=2))
    record("an hour", timedelta(hours=1))
    said = run("recoup_prune_idempotency", "--dry-run", "--database", database)
    assert said.startswith("would delete 1 idempotency record ")
    assert IdempotencyRecord.objects.count() == 2
    assert run("recoup_prune_idempotency", "--database", database).startswith("deleted 1 ")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--older-than", "7 days"], "--older-than"),
        (["--older-than", "0s"], "--older-than"),
        (["--database", "nope"], "--database: 'nope': expected one of default, postgres"),
    ],
    ids=["not a duration", "zero", "unknown database"],
)
def test_prune_refuses_bad_options_with_exit_status_2(args: list[str], says: str) -> None:
    with pytest.raises(CommandError, match=says) as caught:
        run("recoup_prune_idempotency", *args)
    assert caught.value.returncode == 2


def test_a_bad_option_is_one_line_on_stderr_and_exit_2_from_manage_py(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "django", "recoup_prune_idempotency", "--older-than", "soon"],
        cwd=ROOT,
        env=os.environ | {"DJANGO_SETTINGS_MODULE": "tests.contrib_django.settings"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "CommandError: --older-than: 'soon' is not valid; expected a duration such as 90s, "
        "15m, 12h, 7d, 2w or 1d12h"
    ]


def pending_charge(client: Client, gateway: SimulatedGateway, fault: FaultKind, **kw: Any) -> None:
    gateway.inject(Fault(kind=fault, times=1))
    body = charge_body(**kw)
    response = deliver(client, "/recoup/charge", body, message_id=body["idempotency_key"])
    assert json.loads(response.content)["outcome"] == "pending"


@pytest.mark.usefixtures("clock")
def test_reconcile_lists_settles_and_reports_the_pending_charges(
    database: str, client: Client, gateway: SimulatedGateway
) -> None:
    add_invoice("inv_1")
    add_invoice("inv_2", card="card_dnh")
    add_invoice("inv_3")
    gateway.add_card("card_dnh", Scenario.hard("do_not_honor"))
    pending_charge(client, gateway, FaultKind.TIMEOUT_AFTER, invoice_id="inv_1")
    pending_charge(client, gateway, FaultKind.TIMEOUT_AFTER, invoice_id="inv_2")
    pending_charge(client, gateway, FaultKind.TIMEOUT_BEFORE, invoice_id="inv_3")

    listed = run("recoup_reconcile", "--list", "--database", database).splitlines()
    assert [line.split()[0] for line in listed] == [
        "charge:inv_1:2",
        "charge:inv_2:2",
        "charge:inv_3:2",
    ]
    assert "1999 usd  pending since 20" in listed[0]
    assert gateway.stats().calls == 3  # listing asks the provider nothing

    said = run("recoup_reconcile", "--json", "--database", database)
    found = {r["charge_key"]: r for r in json.loads(said)}
    assert {k: r["outcome"] for k, r in found.items()} == {
        "charge:inv_1:2": "paid",
        "charge:inv_2:2": "declined",
        "charge:inv_3:2": "not_made",
    }
    assert found["charge:inv_2:2"]["decline_code"] == "do_not_honor"
    assert set(found["charge:inv_1:2"]) == {
        "charge_key", "invoice_id", "attempt", "outcome", "provider_charge_id", "decline_code"
    }  # fmt: skip
    assert Invoice.objects.get(pk="inv_1").status == "paid"
    assert Invoice.objects.get(pk="inv_2").status == "open"
    states = dict(ChargeRecord.objects.values_list("charge_key", "state"))
    assert states == {
        "charge:inv_1:2": "succeeded",
        "charge:inv_2:2": "failed_retryable",
        "charge:inv_3:2": "pending",  # never made: the next attempt may charge
    }
    assert gateway.charges_per_key()["charge:inv_1:2"] == 1
    assert run("recoup_reconcile", "--invoice", "inv_3", "--database", database).split()[-1] == (
        "not_made"
    )


@pytest.mark.usefixtures("clock")
def test_reconcile_fails_naming_the_charge_that_paid_an_invoice_twice(
    database: str, client: Client, gateway: SimulatedGateway
) -> None:
    add_invoice()
    pending_charge(client, gateway, FaultKind.TIMEOUT_AFTER)
    Invoice.objects.filter(pk="inv_1").update(status="paid")  # paid by hand meanwhile
    out = StringIO()
    with pytest.raises(CommandError, match="refund: charge:inv_1:2") as caught:
        call_command("recoup_reconcile", "--database", database, stdout=out)
    assert caught.value.returncode == 1
    assert "paid_twice" in out.getvalue()
    assert ChargeRecord.objects.get().state == "succeeded"  # recorded, for the refund


@pytest.mark.usefixtures("clock")
def test_reconcile_stops_with_exit_1_when_the_provider_is_down(
    database: str, client: Client, gateway: SimulatedGateway
) -> None:
    add_invoice()
    pending_charge(client, gateway, FaultKind.TIMEOUT_AFTER)
    gateway.inject(Fault(kind=FaultKind.UNAVAILABLE))
    with pytest.raises(CommandError, match="the provider is unavailable") as caught:
        run("recoup_reconcile", "--database", database)
    assert caught.value.returncode == 1
    assert ChargeRecord.objects.get().state == "pending"


def test_reconcile_without_a_provider_setting_is_exit_2(database: str) -> None:
    with override_settings(RECOUP_PAYMENT_PROVIDER=None), pytest.raises(CommandError) as caught:
        run("recoup_reconcile", "--database", database)
    assert caught.value.returncode == 2
    assert "RECOUP_PAYMENT_PROVIDER" in str(caught.value)


def test_nothing_pending_is_said(database: str) -> None:
    assert run("recoup_reconcile", "--database", database) == "no pending charges\n"
    assert run("recoup_reconcile", "--list", "--json", "--database", database) == "[]\n"


@given(st.integers(min_value=1, max_value=36500 * 86400))
def test_a_duration_reads_back_as_itself(seconds: int) -> None:
    duration = timedelta(seconds=seconds)
    assert parse_duration("d", format_duration(duration)) == duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("15m", 900), ("12h", 43200), ("7d", 604800), ("2w", 1209600),
     ("1d12h", 129600), (" 7D ", 604800)],
)  # fmt: skip
def test_durations_read_as_documented(text: str, seconds: int) -> None:
    assert parse_duration("d", text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "7", "d", "7 d", "-7d", "1.5h", "0s", "36501d", "7y"])
def test_what_is_not_a_positive_duration_is_refused_naming_the_field(text: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_duration("--older-than", text)
    assert caught.value.field == "--older-than"


def check_ids() -> list[str]:
    return [message.id or "" for message in check_settings()]


def test_the_settings_of_the_tests_pass_the_checks() -> None:
    assert check_ids() == []


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"USE_TZ": False}, "recoup.E001"),
        ({"RECOUP_SIGNING_SECRET": "whsec_%%%"}, "recoup.E002"),
        ({"RECOUP_PAYMENT_PROVIDER": "tests.nowhere.provider"}, "recoup.E003"),
        ({"RECOUP_INVOICE_BOOK": "tests.contrib_django.billing.models.Delivered"}, "recoup.E003"),
    ],
    ids=["naive instants", "bad secret", "unimportable provider", "not an invoice book"],
)
def test_a_wrong_setting_fails_the_checks(changes: dict[str, Any], error: str) -> None:
    with override_settings(**changes):
        assert check_ids() == [error]
