"""The app's models and migration: the migration applies and unapplies cleanly on SQLite and
PostgreSQL, matches the models, mirrors the receiver's own tables, and the CHECK constraints
hold on both databases."""

from __future__ import annotations

import re
from datetime import timedelta
from importlib import resources
from typing import Any

import pytest
from django.apps import apps
from django.core.management import call_command
from django.db import IntegrityError, connections, transaction
from django.db.migrations.autodetector import MigrationAutodetector
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.state import ProjectState

from recoup.contrib.django.models import ChargeRecord, IdempotencyRecord

from .conftest import NOW

TABLES = {"recoup_charges", "recoup_idempotency_records"}


def tables(alias: str) -> set[str]:
    with connections[alias].cursor() as cursor:
        return set(connections[alias].introspection.table_names(cursor)) & TABLES


@pytest.mark.real_transactions
def test_the_migration_unapplies_and_applies_again_cleanly(database: str) -> None:
    assert tables(database) == TABLES  # the test database was migrated
    call_command("migrate", "recoup", "zero", database=database, verbosity=0)
    assert tables(database) == set()
    call_command("migrate", "recoup", database=database, verbosity=0)
    assert tables(database) == TABLES
    with connections[database].cursor() as cursor:
        constraints = connections[database].introspection.get_constraints(cursor, "recoup_charges")
    assert "recoup_charges_succeeded_has_charge" in constraints
    assert constraints["recoup_charges_invoice"]["columns"] == ["invoice_id", "attempt"]


def test_the_migration_matches_the_models() -> None:
    # What `makemigrations --check` computes, without the database it also consults.
    loader = MigrationLoader(None, ignore_no_migrations=True)
    changes = MigrationAutodetector(loader.project_state(), ProjectState.from_apps(apps)).changes(
        graph=loader.graph, trim_to_apps={"recoup"}
    )
    assert "recoup" not in changes
    assert ("recoup", "0001_initial") in loader.disk_migrations


def _receiver_columns(table: str) -> set[str]:
    text = resources.files("recoup.receiver").joinpath("sqlite.sql").read_text("utf-8")
    body = re.search(rf"CREATE TABLE IF NOT EXISTS {table} \((.*?)\n\);", text, re.S)
    assert body is not None
    return {
        line.split()[0]
        for line in body.group(1).splitlines()
        if line.strip() and not line.strip().startswith(("CONSTRAINT", "CHECK", "--"))
    }


@pytest.mark.parametrize(
    ("model", "table"),
    [(ChargeRecord, "receiver_charges"), (IdempotencyRecord, "receiver_idempotency_keys")],
)
def test_the_models_hold_every_column_of_the_receivers_tables(model: Any, table: str) -> None:
    columns = {field.column for field in model._meta.concrete_fields}
    assert _receiver_columns(table) <= columns


def charge(**changes: Any) -> dict[str, Any]:
    return {
        "charge_key": "charge:inv_1:2",
        "invoice_id": "inv_1",
        "attempt": 2,
        "state": "succeeded",
        "amount": 1999,
        "currency": "usd",
        "provider_charge_id": "ch_1",
        "created_at": NOW,
        "updated_at": NOW,
    } | changes


@pytest.mark.parametrize(
    "changes",
    [
        {"attempt": 0},
        {"amount": 0},
        {"state": "refunded"},
        {"provider_charge_id": None},  # a success names its charge
        {"updated_at": NOW - timedelta(seconds=1)},
    ],
    ids=["attempt", "amount", "state", "success without charge", "updated before created"],
)
def test_the_ledger_refuses_what_its_checks_forbid(database: str, changes: dict[str, Any]) -> None:
    with pytest.raises(IntegrityError), transaction.atomic(using=database):
        ChargeRecord.objects.create(**charge(**changes))
    ChargeRecord.objects.create(**charge())  # and takes a valid row


@pytest.mark.parametrize(
    "changes",
    [
        {"locked_at": NOW, "status": 200, "body": b"{}", "content_type": "application/json"},
        {"locked_at": None},  # neither in flight nor completed
        {"locked_at": None, "status": 200},  # completed without its answer
    ],
    ids=["locked and completed", "neither", "no body"],
)
def test_an_idempotency_record_is_in_flight_or_completed_never_both(
    database: str, changes: dict[str, Any]
) -> None:
    fields = {"key": "k", "fingerprint": "f", "created_at": NOW, "locked_at": NOW} | changes
    with pytest.raises(IntegrityError), transaction.atomic(using=database):
        IdempotencyRecord.objects.create(**fields)
