"""What the recovery report reads from the dunning store, run unchanged on every backend: the
invoices of a window with their attempts (in bulk), events counted by type, merchant tags and
the experiment settings (migration 0005)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recoup.dunning.invoice import AttemptState, Invoice, InvoiceState
from recoup.errors import InvalidInput, StorageError
from recoup.recovery.store import DunningSettings, MerchantTag
from recoup.storage.dunning_rows import attempt_values, invoice_values
from tests.storage.conftest import Store
from tests.storage.test_dunning_store import DAY, HOUR, T0, TENANT, attempt, event, invoice

# Merchant tags


def tag(merchant_id: str = "m_1", kind: str = "seasonal", **overrides: Any) -> MerchantTag:
    fields: dict[str, Any] = {
        "merchant_id": merchant_id,
        "tag": kind,
        "note": "ski resort: quiet all summer",
        "tagged_at": T0,
    }
    fields.update(overrides)
    return MerchantTag(**fields)


def test_a_tag_is_put_read_back_replaced_and_deleted(store: Store) -> None:
    assert store.merchant_tags(TENANT) == []
    assert store.put_merchant_tag(TENANT, tag()) == tag()
    store.put_merchant_tag(TENANT, tag("m_0", "new", note=""))
    assert store.merchant_tags(TENANT) == [tag("m_0", "new", note=""), tag()]
    replaced = tag(kind="other", note="ünïcode ✓ 'quoted'", tagged_at=T0 + DAY)
    assert store.put_merchant_tag(TENANT, replaced) == replaced
    assert store.merchant_tags(TENANT) == [tag("m_0", "new", note=""), replaced]
    assert store.delete_merchant_tag(TENANT, "m_1") is True
    assert store.delete_merchant_tag(TENANT, "m_1") is False
    assert store.merchant_tags(TENANT) == [tag("m_0", "new", note="")]


def test_tags_belong_to_their_tenant(store: Store) -> None:
    store.put_merchant_tag(TENANT, tag())
    assert store.merchant_tags("t2") == []
    assert store.delete_merchant_tag("t2", "m_1") is False
    assert store.merchant_tags(TENANT) == [tag()]


@pytest.mark.parametrize(
    ("field", "bad"),
    [
        ("tag", {"kind": "vip"}),
        ("tag", {"kind": ""}),
        ("merchant_id", {"merchant_id": ""}),
        ("merchant_id", {"merchant_id": "m" * 101}),
        ("note", {"note": "n" * 1001}),
        ("tagged_at", {"tagged_at": datetime(2026, 3, 1)}),
    ],
)
def test_a_tag_the_table_would_refuse_is_invalid_input_naming_the_field(
    store: Store, field: str, bad: dict[str, Any]
) -> None:
    store.put_merchant_tag(TENANT, tag())
    with pytest.raises(InvalidInput) as caught:
        store.put_merchant_tag(TENANT, tag(**{"merchant_id": "m_1", **bad}))
    assert caught.value.field == field
    assert store.merchant_tags(TENANT) == [tag()]


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE merchant_tags SET tag = 'vip'",
        "UPDATE merchant_tags SET merchant_id = ''",
    ],
)
def test_the_tags_table_refuses_impossible_rows(store: Store, statement: str) -> None:
    store.put_merchant_tag(TENANT, tag())
    with pytest.raises(StorageError, match=r"(?i)check|constraint"), store.write() as conn:
        conn.execute(statement)
    assert store.merchant_tags(TENANT) == [tag()]


# The invoices of a window


def test_report_invoices_are_those_failed_in_the_half_open_window_with_their_attempts(
    store: Store,
) -> None:
    def failed(invoice_id: str, at: datetime, **overrides: Any) -> Invoice:
        return invoice(invoice_id, failed_at=at, created_at=at, updated_at=at, **overrides)

    two_attempts = (
        attempt("inside_a", 1, state=AttemptState.FAILED),
        attempt("inside_a", 2),
    )
    made = [
        failed("before", T0 - HOUR),
        failed("inside_a", T0, attempts=two_attempts),
        failed("inside_b", T0 + HOUR, attempts=()),  # no attempt (a hard decline)
        failed("at_until", T0 + DAY),
        failed("inside_a", T0, tenant="t2"),  # another tenant's, same id
    ]
    for one in made:
        store.create_invoice(one, [])
    found = store.report_invoices(TENANT, since=T0, until=T0 + DAY)
    assert found == [made[1], made[2]]
    assert found[0].attempts == two_attempts
    assert store.report_invoices(TENANT, since=T0, until=T0) == []
    assert [i.tenant for i in store.report_invoices("t2", since=T0, until=T0 + DAY)] == ["t2"]


def test_dunning_amounts_sum_the_windows_invoices_by_kind_and_currency(store: Store) -> None:
    def failed(invoice_id: str, at: datetime, **overrides: Any) -> Invoice:
        return invoice(invoice_id, failed_at=at, created_at=at, updated_at=at, **overrides)

    made = [
        failed("before", T0 - HOUR, amount=1),
        failed("retrying", T0, amount=1000),
        failed("awaiting", T0 + HOUR, amount=20, state=InvoiceState.AWAITING_CUSTOMER),
        failed("paid", T0 + HOUR, amount=300, currency="usd", state=InvoiceState.RECOVERED),
        failed("lost", T0 + 2 * HOUR, amount=4000, state=InvoiceState.EXHAUSTED),
        failed("stopped", T0 + 2 * HOUR, amount=50000, state=InvoiceState.CANCELLED),
        failed("at_until", T0 + DAY, amount=7),
        failed("retrying", T0, amount=99, tenant="t2"),  # another tenant's, same id
    ]
    for one in made:
        store.create_invoice(one, [])
    own = store.dunning_amounts(TENANT, since=T0, until=T0 + DAY)
    assert own.amounts == {
        ("at_risk", "eur"): 1020,
        ("recovered", "usd"): 300,
        ("lost", "eur"): 4000,
        ("stopped", "eur"): 50000,
    }
    assert own.invoices == {
        "retrying": 1, "awaiting_customer": 1, "recovered": 1, "exhausted": 1, "cancelled": 1
    }  # fmt: skip
    everything = store.dunning_amounts(TENANT, since=T0 - DAY, until=T0 + 2 * DAY)
    assert everything.amounts == store.dunning_figures()[TENANT].amounts  # /metrics' sums
    assert store.dunning_amounts("t3", since=T0, until=T0 + DAY).amounts == {}


def test_a_window_that_ends_before_it_starts_is_invalid_input(store: Store) -> None:
    with pytest.raises(InvalidInput) as caught:
        store.report_invoices(TENANT, since=T0, until=T0 - HOUR)
    assert caught.value.field == "until"
    with pytest.raises(InvalidInput) as caught:
        store.count_events(TENANT, "invoice.double_charged", since=datetime(2026, 3, 1), until=T0)
    assert caught.value.field == "since"


def bulk_insert(store: Store, invoices: list[Invoice]) -> None:
    """Many invoices in one transaction, through the store's own insert statements (creating
    them one transaction at a time would dominate the test)."""
    encode = store.dialect.encode_instant  # type: ignore[attr-defined]
    rows = [invoice_values(one, encode) for one in invoices]
    attempts = [attempt_values(one, a, encode) for one in invoices for a in one.attempts]
    queries = store.dialect.queries  # type: ignore[attr-defined]
    with store.write() as conn:
        conn.cursor().executemany(queries["insert_invoice"], rows)
        conn.cursor().executemany(queries["upsert_attempt"], attempts)


class CountingConnection:
    """A connection that counts the statements run through it."""

    def __init__(self, conn: Any, counts: list[str]) -> None:
        self._conn = conn
        self._counts = counts

    def execute(self, statement: str, *args: Any, **kwargs: Any) -> Any:
        self._counts.append(statement)
        return self._conn.execute(statement, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def counting_statements(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every statement the store runs from now on (through any of its dialect's connections)."""
    statements: list[str] = []
    dialect = store.dialect  # type: ignore[attr-defined]
    for opener in ("read", "write", "snapshot"):
        original = getattr(dialect, opener)

        @contextmanager
        def counted(original: Any = original) -> Iterator[Any]:
            with original() as conn:
                yield CountingConnection(conn, statements)

        monkeypatch.setattr(dialect, opener, counted)
    return statements


def test_a_report_over_five_thousand_invoices_is_two_statements(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    count = 5_000
    made = []
    for n in range(count):
        invoice_id = f"inv_{n:05d}"
        at = T0 + n * timedelta(minutes=7)
        attempts = tuple(
            attempt(invoice_id, k, state=AttemptState.FAILED if k < 4 else AttemptState.SCHEDULED)
            for k in range(1, 1 + n % 5)  # 0 to 4 attempts
        )
        made.append(
            invoice(
                invoice_id,
                failed_at=at,
                created_at=at,
                updated_at=at,
                merchant_id=f"m_{n % 40}",
                attempts=attempts,
            )
        )
    bulk_insert(store, made)
    statements = counting_statements(store, monkeypatch)
    started = time.perf_counter()
    found = store.report_invoices(TENANT, since=T0, until=T0 + 60 * DAY)
    elapsed = time.perf_counter() - started
    assert found == made
    # The invoices, then their attempts (and, on each backend, what opens the snapshot):
    # never one statement per invoice.
    assert len(statements) <= 3, statements
    # Measured ~0.15 s on either backend on an idle 2-core machine; the bound only catches
    # an order-of-magnitude regression on a loaded one.
    assert elapsed < 30, elapsed


def _plan(store: Store, query: str, params: dict[str, Any]) -> str:
    sql = store.dialect.queries[query]  # type: ignore[attr-defined]
    with store.read() as conn:
        if store.backend == "postgresql":
            conn.execute("SET LOCAL enable_seqscan = off")
            rows = conn.execute("EXPLAIN " + sql, params).fetchall()
            return "\n".join(row[0] for row in rows)
        rows = conn.execute("EXPLAIN QUERY PLAN " + sql, params).fetchall()
        return "\n".join(str(row[-1]) for row in rows)


@pytest.mark.parametrize(
    ("query", "index"),
    [
        ("report_invoices", "invoices_failed"),
        ("report_attempts", "invoices_failed"),
        ("count_events", "invoice_events_type"),
    ],
)
def test_the_reports_reads_go_through_their_indexes(store: Store, query: str, index: str) -> None:
    # A year of invoices, each with attempts and events, and the planner's statistics: a day's
    # window must not walk the tenant's whole history.
    made = [
        invoice(
            f"inv_{n:04d}",
            failed_at=T0 + n * 4 * HOUR,
            attempts=(attempt(f"inv_{n:04d}", 1), attempt(f"inv_{n:04d}", 2)),
        )
        for n in range(2_000)
    ]
    bulk_insert(store, made)
    with store.write() as conn:
        # Named, unqualified (the store's schema): a bare ANALYZE would take every table of
        # the database, other tests' schemas too, and deadlock with their DROP SCHEMA.
        for table in ("invoices", "invoice_attempts", "invoice_events"):
            conn.execute(f"ANALYZE {table}")
    encode = store.dialect.encode_instant  # type: ignore[attr-defined]
    params = {
        "tenant": TENANT,
        "type": "invoice.double_charged",
        "since": encode(T0),
        "until": encode(T0 + DAY),
    }
    plan = _plan(store, query, params)
    assert index in plan, plan


# Events by type


def test_count_events_counts_one_type_of_the_tenant_in_the_window(store: Store) -> None:
    store.create_invoice(
        invoice("inv_1"),
        [
            event("inv_1", 1, "invoice.double_charged", at=T0 - HOUR),
            event("inv_1", 2, "invoice.double_charged", at=T0),
            event("inv_1", 3, "invoice.retry_failed", at=T0 + HOUR),
            event("inv_1", 4, "invoice.double_charged", at=T0 + 2 * HOUR),
            event("inv_1", 5, "invoice.double_charged", at=T0 + DAY),
        ],
    )
    store.create_invoice(
        invoice("inv_1", tenant="t2"),
        [event("inv_1", 1, "invoice.double_charged", at=T0, tenant="t2")],
    )
    count = store.count_events
    assert count(TENANT, "invoice.double_charged", since=T0, until=T0 + DAY) == 2
    assert count(TENANT, "invoice.retry_failed", since=T0, until=T0 + DAY) == 1
    assert count(TENANT, "invoice.recovered", since=T0, until=T0 + DAY) == 0
    assert count("t2", "invoice.double_charged", since=T0, until=T0 + DAY) == 1


# Experiment settings


def experiment(**overrides: Any) -> DunningSettings:
    fields: dict[str, Any] = {
        "tenant": TENANT,
        "policy_toml": 'name = "a"\n',
        "event_url": None,
        "charge_url": "https://merchant.example/charge",
        "updated_at": T0,
        "experiment_name": "morning-vs-evening",
        "experiment_policy_toml": 'name = "b"\n',
        "experiment_share": 0.25,
    }
    fields.update(overrides)
    return DunningSettings(**fields)


@settings(max_examples=20, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(share=st.floats(min_value=0, max_value=1, exclude_min=True, exclude_max=True))
def test_experiment_settings_round_trip_and_clear(store: Store, share: float) -> None:
    with_experiment = experiment(experiment_share=share)
    assert store.put_settings(with_experiment) == with_experiment
    assert store.get_settings(TENANT) == with_experiment
    cleared = experiment(experiment_name=None, experiment_policy_toml=None, experiment_share=None)
    assert store.put_settings(cleared) == cleared
    assert store.get_settings(TENANT) == cleared


@pytest.mark.parametrize(
    ("field", "overrides"),
    [
        ("experiment_share", {"experiment_share": 0.0}),
        ("experiment_share", {"experiment_share": 1.0}),
        ("experiment_share", {"experiment_share": float("nan")}),
        ("experiment_share", {"experiment_share": None}),
        ("experiment_policy_toml", {"experiment_policy_toml": None}),
        ("experiment_name", {"experiment_name": ""}),
        ("experiment_name", {"experiment_name": "x" * 101}),
    ],
)
def test_a_partial_or_out_of_range_experiment_is_invalid_input_naming_the_field(
    field: str, overrides: dict[str, Any]
) -> None:
    with pytest.raises(InvalidInput) as caught:
        experiment(**overrides)
    assert caught.value.field == field


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE dunning_settings SET experiment_share = 1",
        "UPDATE dunning_settings SET experiment_share = NULL",
        "UPDATE dunning_settings SET experiment_policy_toml = NULL",
        "UPDATE dunning_settings SET experiment_name = NULL",
    ],
)
def test_the_settings_table_keeps_an_experiment_whole(store: Store, statement: str) -> None:
    store.put_settings(experiment())
    with pytest.raises(StorageError, match=r"(?i)check|constraint"), store.write() as conn:
        conn.execute(statement)
    assert store.get_settings(TENANT) == experiment()
