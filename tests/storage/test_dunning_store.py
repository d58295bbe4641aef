"""The dunning store's behaviour suite (`recoup.recovery.store.DunningStore`), run unchanged on
every backend: invoices with their attempts and events, locked changes, pages, the attempts
that disagree with their jobs, card history and settings.

Instants are fixed (time is an argument); only the concurrency tests use real threads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recoup.dunning.invoice import (
    AttemptRecord,
    AttemptState,
    Invoice,
    InvoiceEvent,
    InvoiceState,
    attempt_job_id,
    event_id,
    job_group,
)
from recoup.errors import Conflict, InvalidInput, StorageError
from recoup.jobs.model import NewJob, PythonTarget, new_id
from recoup.recovery.store import (
    DunningSettings,
    DunningStore,
    InvoiceChange,
    InvoiceFilter,
)
from tests.storage.conftest import Store, only_on

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
TENANT = "t1"


def attempt(
    invoice_id: str, n: int, *, state: AttemptState = AttemptState.SCHEDULED, tenant: str = TENANT
) -> AttemptRecord:
    return AttemptRecord(
        attempt=n,
        at=T0 + n * DAY,
        state=state,
        job_id=attempt_job_id(tenant, invoice_id, n),
    )


def invoice(invoice_id: str = "inv_1", **overrides: Any) -> Invoice:
    fields: dict[str, Any] = {
        "tenant": TENANT,
        "invoice_id": invoice_id,
        "customer_id": "cus_1",
        "amount": 4200,
        "currency": "eur",
        "failed_at": T0,
        "timezone": "Europe/Paris",
        "country": "FR",
        "decline_code": "insufficient_funds",
        "advice_code": None,
        "card_fingerprint": "card_1",
        "card_network": "visa",
        "gateway": "sim",
        "merchant_id": "m_1",
        "charge_url": "https://merchant.example/charge",
        "policy": "business-days",
        "state": InvoiceState.RETRYING,
        "decision": "retry",
        "reason": "soft decline: retry on schedule",
        "final_action": "pause_access",
        "attempts": (),
        "created_at": T0,
        "updated_at": T0,
    }
    fields.update(overrides)
    if "attempts" not in overrides:
        fields["attempts"] = (attempt(invoice_id, 1, tenant=fields["tenant"]),)
    return Invoice(**fields)


def event(
    invoice_id: str,
    seq: int,
    type: str = "invoice.retry_scheduled",
    *,
    at: datetime = T0,
    tenant: str = TENANT,
    data: dict[str, Any] | None = None,
) -> InvoiceEvent:
    return InvoiceEvent(
        id=event_id(tenant, invoice_id, seq),
        tenant=tenant,
        invoice_id=invoice_id,
        seq=seq,
        type=type,
        at=at,
        data=data if data is not None else {"seq": seq},
    )


def stored(store: Store, invoice_id: str = "inv_1", tenant: str = TENANT) -> Invoice:
    found = store.get_invoice(tenant, invoice_id)
    assert found is not None
    return found


def bump(current: Invoice, **changes: Any) -> Invoice:
    """The next version of an invoice (what a transition returns)."""
    return replace(current, version=current.version + 1, updated_at=T0 + HOUR, **changes)


def in_threads(count: int, work: Callable[[], Any]) -> list[Any]:
    """Run `work` in `count` threads started together; their results (or what they raised)."""
    barrier = threading.Barrier(count)
    results: list[Any] = []
    lock = threading.Lock()

    def main() -> None:
        barrier.wait()
        try:
            result = work()
        except Exception as exc:
            result = exc
        with lock:
            results.append(result)

    threads = [threading.Thread(target=main) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return results


def test_every_backend_is_a_dunning_store(store: Store) -> None:
    dunning: DunningStore = store  # what open_store returns serves the recovery layer too
    assert dunning.get_invoice(TENANT, "absent") is None


# Creating and reading


def test_a_created_invoice_reads_back_with_its_attempts_and_events(store: Store) -> None:
    new = invoice(
        attempts=(attempt("inv_1", 1), attempt("inv_1", 2, state=AttemptState.PENDING)),
        # An offset other than UTC: stored and read back as the same instant.
        failed_at=datetime(2026, 3, 1, 13, 0, tzinfo=timezone(HOUR)),
    )
    events = [event("inv_1", 1, "invoice.dunning_started"), event("inv_1", 2, "note.planned")]
    created, inserted = store.create_invoice(new, events)
    assert inserted and created == new
    assert stored(store) == new
    assert store.invoice_events(TENANT, "inv_1") == events
    assert store.get_invoice("other-tenant", "inv_1") is None


def test_an_invoice_without_attempts_or_optional_fields_round_trips(store: Store) -> None:
    bare = invoice(
        attempts=(),
        state=InvoiceState.EXHAUSTED,
        decision="no_retry",
        country=None,
        decline_code=None,
        card_fingerprint=None,
        card_network=None,
        gateway=None,
        merchant_id=None,
        final_action="mark_uncollectible",
    )
    store.create_invoice(bare, [])
    assert stored(store) == bare


def test_creating_an_existing_invoice_returns_the_stored_one_and_writes_nothing(
    store: Store,
) -> None:
    first = invoice()
    store.create_invoice(first, [event("inv_1", 1)])
    again = invoice(amount=999, attempts=(attempt("inv_1", 1), attempt("inv_1", 2)))
    found, inserted = store.create_invoice(again, [event("inv_1", 2)])
    assert not inserted and found == first
    assert stored(store) == first
    assert [e.seq for e in store.invoice_events(TENANT, "inv_1")] == [1]


def test_one_invoice_id_per_tenant_but_each_tenant_may_use_it(store: Store) -> None:
    mine = invoice()
    theirs = invoice(tenant="t2", attempts=(attempt("inv_1", 1, tenant="t2"),))
    assert store.create_invoice(mine, [])[1]
    assert store.create_invoice(theirs, [])[1]
    assert stored(store, tenant="t2") == theirs
    assert stored(store) == mine


def test_concurrent_creations_of_one_invoice_let_exactly_one_through(store: Store) -> None:
    new = invoice(attempts=(attempt("inv_1", 1), attempt("inv_1", 2)))
    results = in_threads(2, lambda: store.create_invoice(new, [event("inv_1", 1)]))
    assert sorted(inserted for _, inserted in results) == [False, True]
    assert all(found == new for found, _ in results)
    assert len(store.invoice_events(TENANT, "inv_1")) == 1


@pytest.mark.parametrize(
    ("field", "overrides"),
    [
        ("amount", {"amount": 0}),
        ("decision", {"decision": "maybe"}),
        ("final_action", {"final_action": "shrug"}),
        ("recovered_by", {"recovered_by": "attempt:1"}),  # while still retrying
        ("version", {"version": -1}),
    ],
)
def test_an_invoice_the_tables_would_refuse_is_invalid_input_naming_the_field(
    store: Store, field: str, overrides: dict[str, Any]
) -> None:
    with pytest.raises(InvalidInput) as caught:
        store.create_invoice(invoice(**overrides), [])
    assert caught.value.field == field
    assert store.get_invoice(TENANT, "inv_1") is None


def test_events_must_be_the_invoices_own_and_numbered_once(store: Store) -> None:
    for events in (
        [event("inv_2", 1)],  # another invoice's
        [event("inv_1", 1), event("inv_1", 1)],  # one number twice
        [event("inv_1", 0)],  # numbers start at 1
    ):
        with pytest.raises(InvalidInput):
            store.create_invoice(invoice(), events)
    assert store.get_invoice(TENANT, "inv_1") is None


# The schema is the backstop: CHECK constraints refuse what the checks above would.


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE invoices SET amount = 0",
        "UPDATE invoices SET state = 'paused'",
        "UPDATE invoices SET decision = 'maybe'",
        "UPDATE invoices SET final_action = 'shrug'",
        "UPDATE invoices SET recovered_by = 'attempt:1'",  # not recovered
        "UPDATE invoices SET version = -1",
        "UPDATE invoice_attempts SET attempt = 0",
        "UPDATE invoice_attempts SET state = 'lost'",
        "UPDATE invoice_events SET seq = 0",
        "UPDATE invoice_events SET data = '[1]'",  # an object, not an array
        "UPDATE invoice_events SET type = ''",
    ],
)
def test_the_tables_refuse_impossible_rows(store: Store, statement: str) -> None:
    store.create_invoice(invoice(), [event("inv_1", 1)])
    with pytest.raises(StorageError, match=r"(?i)check|constraint"), store.write() as conn:
        conn.execute(statement)
    assert stored(store) == invoice()


# Listing


def test_list_filters_by_state_and_customer_oldest_first(store: Store) -> None:
    a = invoice("a", created_at=T0 + 2 * HOUR)
    b = invoice("b", created_at=T0, customer_id="cus_2")
    c = invoice(
        "c",
        created_at=T0 + HOUR,
        state=InvoiceState.RECOVERED,
        recovered_by="attempt:1",
        attempts=(attempt("c", 1, state=AttemptState.SUCCEEDED),),
    )
    d = invoice("d", created_at=T0 + HOUR, customer_id="cus_2", state=InvoiceState.EXHAUSTED)
    for new in (a, b, c, d):
        store.create_invoice(new, [])
    store.create_invoice(invoice("e", tenant="t2", attempts=()), [])

    def ids(**filters: Any) -> list[str]:
        page = store.list_invoices(InvoiceFilter(tenant=TENANT, **filters))
        return [i.invoice_id for i in page.invoices]

    assert ids() == ["b", "c", "d", "a"]  # (created_at, invoice_id)
    assert ids(state=InvoiceState.RETRYING) == ["b", "a"]
    assert ids(customer_id="cus_2") == ["b", "d"]
    assert ids(customer_id="cus_2", state=InvoiceState.EXHAUSTED) == ["d"]
    assert ids(customer_id="nobody") == []
    listed = store.list_invoices(InvoiceFilter(tenant=TENANT)).invoices
    assert listed == [b, c, d, a]  # with their attempts


@pytest.mark.parametrize(("field", "query"), [
    ("limit", {"limit": 0}),
    ("limit", {"limit": 1001}),
    ("cursor", {"cursor": "not a cursor!"}),
])  # fmt: skip
def test_a_bad_limit_or_cursor_is_invalid_input_naming_it(
    store: Store, field: str, query: dict[str, Any]
) -> None:
    with pytest.raises(InvalidInput) as caught:
        store.list_invoices(InvoiceFilter(tenant=TENANT, **query))
    assert caught.value.field == field


def test_a_limit_of_1000_is_allowed(store: Store) -> None:
    store.create_invoice(invoice(), [])
    assert len(store.list_invoices(InvoiceFilter(tenant=TENANT, limit=1000)).invoices) == 1


@settings(max_examples=15, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    # Per invoice: (hours after T0 it was created, state index, customer index). Many share an
    # instant, so the invoice id must break ties for the cursor.
    rows=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 1)), max_size=14),
    state=st.none() | st.sampled_from(list(InvoiceState)),
    customer=st.none() | st.sampled_from(["cus_0", "cus_1"]),
    page_size=st.integers(1, 5),
)
def test_pages_concatenated_are_the_whole_ordered_listing(
    store: Store,
    rows: list[tuple[int, int, int]],
    state: InvoiceState | None,
    customer: str | None,
    page_size: int,
) -> None:
    tenant = f"t-{new_id()}"
    states = list(InvoiceState)
    created = []
    for n, (hours, state_index, customer_index) in enumerate(rows):
        invoice_id = f"inv_{(n * 7) % 11:02d}_{n}"  # ids not in creation order
        new = invoice(
            invoice_id,
            tenant=tenant,
            created_at=T0 + hours * HOUR,
            state=states[state_index],
            recovered_by="paid_out_of_band" if states[state_index].value == "recovered" else None,
            customer_id=f"cus_{customer_index}",
            attempts=(attempt(invoice_id, 1, tenant=tenant),),
        )
        store.create_invoice(new, [])
        created.append(new)
    expected = sorted(
        (
            i
            for i in created
            if (state is None or i.state is state)
            and (customer is None or i.customer_id == customer)
        ),
        key=lambda i: (i.created_at, i.invoice_id),
    )
    seen: list[Invoice] = []
    cursor = None
    while True:
        page = store.list_invoices(
            InvoiceFilter(
                tenant=tenant, state=state, customer_id=customer, limit=page_size, cursor=cursor
            )
        )
        assert len(page.invoices) <= page_size
        seen.extend(page.invoices)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == expected


# Changing


def test_a_change_writes_the_invoice_its_attempts_and_its_events_together(store: Store) -> None:
    store.create_invoice(invoice(), [event("inv_1", 1)])
    seen: list[Invoice] = []

    def fail_first_plan_second(current: Invoice) -> InvoiceChange:
        seen.append(current)
        failed = replace(current.attempts[0], state=AttemptState.FAILED, reported_at=T0 + DAY)
        return InvoiceChange(
            invoice=bump(current, attempts=(failed, attempt("inv_1", 2)), reason="declined"),
            events=(event("inv_1", 2, "invoice.attempt_failed"), event("inv_1", 3, "note.x")),
        )

    result = store.change_invoice(TENANT, "inv_1", fail_first_plan_second)
    assert result is not None and seen == [invoice()]  # called once, with the stored invoice
    after = stored(store)
    assert after == result.invoice
    assert after.version == 1 and after.reason == "declined"
    assert [(a.attempt, a.state) for a in after.attempts] == [
        (1, AttemptState.FAILED),
        (2, AttemptState.SCHEDULED),
    ]
    assert after.attempts[0].reported_at == T0 + DAY
    assert [e.seq for e in store.invoice_events(TENANT, "inv_1")] == [1, 2, 3]


def test_created_at_is_kept_by_changes(store: Store) -> None:
    # created_at orders listings and their cursors: a change cannot move an invoice.
    store.create_invoice(invoice(), [])
    store.change_invoice(
        TENANT,
        "inv_1",
        lambda current: InvoiceChange(invoice=bump(current, created_at=T0 + DAY)),
    )
    assert stored(store).created_at == T0 and stored(store).version == 1


def test_a_version_that_is_not_the_next_one_is_a_conflict(store: Store) -> None:
    store.create_invoice(invoice(), [])

    def writing(version: int) -> Callable[[Invoice], InvoiceChange]:
        return lambda current: InvoiceChange(
            invoice=replace(current, version=version, reason="stale"),
            events=(event("inv_1", 1),),
        )

    for version in (0, 2):  # the version read again, or one skipped
        with pytest.raises(Conflict):
            store.change_invoice(TENANT, "inv_1", writing(version))
    assert stored(store) == invoice()
    assert store.invoice_events(TENANT, "inv_1") == []


def test_a_failed_change_writes_nothing_at_all(store: Store) -> None:
    # The invoice row and the attempts go first; the event that follows clashes with a stored
    # number under another id, and the whole transaction goes.
    store.create_invoice(invoice(), [event("inv_1", 1)])
    clash = replace(event("inv_1", 1, "invoice.other"), id="another-id")

    def change(current: Invoice) -> InvoiceChange:
        return InvoiceChange(
            invoice=bump(current, attempts=(*current.attempts, attempt("inv_1", 2))),
            events=(clash,),
        )

    with pytest.raises(Conflict):
        store.change_invoice(TENANT, "inv_1", change)
    assert stored(store) == invoice()
    assert [e.id for e in store.invoice_events(TENANT, "inv_1")] == [event("inv_1", 1).id]

    def boom(current: Invoice) -> InvoiceChange:
        raise RuntimeError("the transition failed")

    with pytest.raises(RuntimeError):
        store.change_invoice(TENANT, "inv_1", boom)
    assert stored(store) == invoice()


def test_a_change_that_returns_none_writes_nothing(store: Store) -> None:
    store.create_invoice(invoice(), [])
    calls: list[Invoice] = []

    def nothing_to_do(current: Invoice) -> None:
        calls.append(current)
        return None

    assert store.change_invoice(TENANT, "inv_1", nothing_to_do) is None
    assert calls == [invoice()] and stored(store) == invoice()
    # An absent invoice: None, and the change is never called.
    assert store.change_invoice(TENANT, "absent", nothing_to_do) is None
    assert len(calls) == 1


def test_a_replayed_event_id_is_skipped(store: Store) -> None:
    store.create_invoice(invoice(), [event("inv_1", 1)])
    store.change_invoice(
        TENANT,
        "inv_1",
        lambda current: InvoiceChange(
            invoice=bump(current), events=(event("inv_1", 1), event("inv_1", 2))
        ),
    )
    assert [e.seq for e in store.invoice_events(TENANT, "inv_1")] == [1, 2]


def test_a_change_cannot_move_an_invoice_to_another_id(store: Store) -> None:
    store.create_invoice(invoice(), [])
    with pytest.raises(InvalidInput):
        store.change_invoice(
            TENANT,
            "inv_1",
            lambda current: InvoiceChange(invoice=bump(current, invoice_id="inv_2")),
        )
    assert store.get_invoice(TENANT, "inv_2") is None


def test_concurrent_changes_of_one_invoice_are_serialised(store: Store) -> None:
    # Each change appends the next attempt to what it read: a lost update would leave a gap
    # (or raise a Conflict), so 2 threads × 20 changes must end with attempts 1–40.
    store.create_invoice(invoice(attempts=()), [])

    def append_next(current: Invoice) -> InvoiceChange:
        n = len(current.attempts) + 1
        return InvoiceChange(
            invoice=bump(current, attempts=(*current.attempts, attempt("inv_1", n))),
            events=(event("inv_1", n, "note.appended"),),
        )

    def twenty() -> int:
        for _ in range(20):
            store.change_invoice(TENANT, "inv_1", append_next)
        return 20

    assert in_threads(2, twenty) == [20, 20]
    after = stored(store)
    assert after.version == 40
    assert [a.attempt for a in after.attempts] == list(range(1, 41))
    assert [e.seq for e in store.invoice_events(TENANT, "inv_1")] == list(range(1, 41))


# Events


def test_undispatched_events_are_the_sendable_ones_of_every_tenant_oldest_first(
    store: Store,
) -> None:
    store.create_invoice(
        invoice("a"),
        [
            event("a", 1, "invoice.dunning_started", at=T0 + HOUR),
            event("a", 2, "note.planned", at=T0),  # a timeline note: never sent
            event("a", 3, "invoice.retry_scheduled", at=T0 + HOUR),
        ],
    )
    store.create_invoice(
        invoice("b", tenant="t2", attempts=()),
        [event("b", 1, "invoice.dunning_started", at=T0, tenant="t2", data={"é": [1, None]})],
    )
    pending = store.undispatched_events()
    assert [(e.tenant, e.invoice_id, e.seq) for e in pending] == [
        ("t2", "b", 1),
        (TENANT, "a", 1),
        (TENANT, "a", 3),
    ]
    assert pending[0].data == {"é": [1, None]}
    assert [e.seq for e in store.undispatched_events(limit=1)] == [1]

    store.mark_events_dispatched([pending[0].id, pending[1].id], now=T0 + DAY)
    assert [e.id for e in store.undispatched_events()] == [pending[2].id]
    store.mark_events_dispatched([pending[0].id], now=T0 + 2 * DAY)  # again: nothing changes
    store.mark_events_dispatched([], now=T0)
    # The timeline keeps every event, sent or not, by number.
    assert [e.seq for e in store.invoice_events(TENANT, "a")] == [1, 2, 3]


# Attempts and their jobs


def attempt_job(invoice_id: str, n: int, tenant: str = TENANT) -> NewJob:
    return NewJob(
        id=attempt_job_id(tenant, invoice_id, n),
        tenant=tenant,
        run_at=T0 + n * DAY,
        target=PythonTarget(handler="dunning.attempt"),
        group=job_group(invoice_id),
    )


def test_attempts_out_of_sync_are_scheduled_ones_without_a_job_and_cancelled_ones_with_a_live_job(
    store: Store,
) -> None:
    store.create_invoice(
        invoice(
            attempts=(
                attempt("inv_1", 1),  # its job was never created (a crash after the commit)
                attempt("inv_1", 2),  # its job exists: in sync
                attempt("inv_1", 3, state=AttemptState.CANCELLED),  # its job still live
                attempt("inv_1", 4, state=AttemptState.CANCELLED),  # its job cancelled too
                attempt("inv_1", 5, state=AttemptState.CANCELLED),  # never had a job
                attempt("inv_1", 6, state=AttemptState.FAILED),  # its job was never created
            )
        ),
        [],
    )
    for n in (2, 3, 4):
        store.insert(attempt_job("inv_1", n), now=T0)
    store.cancel(TENANT, attempt_job_id(TENANT, "inv_1", 4), now=T0)
    # A job of the same id in another tenant is not the attempt's job.
    store.create_invoice(invoice(tenant="t2", attempts=(attempt("inv_1", 1, tenant="t2"),)), [])

    def out_of_sync() -> list[tuple[str, int]]:
        return [(r.tenant, r.attempt.attempt) for r in store.attempts_out_of_sync()]

    assert out_of_sync() == [(TENANT, 1), ("t2", 1), (TENANT, 3)]  # by when they are due
    refs = store.attempts_out_of_sync(limit=1)
    assert (
        len(refs) == 1 and refs[0].invoice_id == "inv_1" and refs[0].attempt == attempt("inv_1", 1)
    )

    # Repaired: the missing jobs created, the live job of the cancelled attempt cancelled.
    store.insert(attempt_job("inv_1", 1), now=T0)
    store.insert(attempt_job("inv_1", 1, tenant="t2"), now=T0)
    store.cancel(TENANT, attempt_job_id(TENANT, "inv_1", 3), now=T0)
    assert out_of_sync() == []


# Card history


def test_card_history_is_each_failure_and_every_attempt_not_cancelled(store: Store) -> None:
    store.create_invoice(
        invoice(
            "a",
            amount=1000,
            merchant_id="m_a",
            failed_at=T0,
            attempts=(
                attempt("a", 1, state=AttemptState.FAILED),  # T0 + 1 day
                attempt("a", 2, state=AttemptState.CANCELLED),  # not counted
                attempt("a", 3),  # planned: counted
            ),
        ),
        [],
    )
    store.create_invoice(invoice("b", failed_at=T0 - 10 * DAY, attempts=()), [])  # too old
    store.create_invoice(invoice("c", card_fingerprint="card_2"), [])  # another card
    store.create_invoice(invoice("a", tenant="t2", attempts=()), [])  # another tenant

    history = store.card_history(TENANT, "card_1", since=T0 - DAY)
    assert [(h.invoice, h.at, h.reattempt) for h in history] == [
        ("a", T0, False),
        ("a", T0 + DAY, True),
        ("a", T0 + 3 * DAY, True),
    ]
    assert {(h.card, h.merchant_id, h.amount) for h in history} == {("card_1", "m_a", 1000)}
    # `since` is inclusive, and cuts the attempts too.
    assert [h.at for h in store.card_history(TENANT, "card_1", since=T0 + DAY)] == [
        T0 + DAY,
        T0 + 3 * DAY,
    ]
    assert store.card_history(TENANT, "card_9", since=T0) == []


@only_on("sqlite")  # PostgreSQL plans from statistics; SQLite keeps the query's join order
def test_card_history_walks_the_cards_invoices_not_the_tenants_attempts(store: Store) -> None:
    # Read on every failure and outcome: a plan led by the tenant's attempts made each read as
    # long as the tenant's history (the demo's month of failures went quadratic on SQLite).
    with store.read() as conn:
        plan = [
            row[3]
            for row in conn.execute(
                "EXPLAIN QUERY PLAN " + store.dialect.queries["card_history"],
                {"tenant": TENANT, "card": "card_1", "since": 0},
            )
        ]
    searches = [step for step in plan if step.startswith(("SEARCH", "SCAN"))]
    assert searches[0].startswith("SEARCH invoices USING INDEX invoices_card"), plan
    assert searches[1].startswith("SEARCH i USING INDEX invoices_card"), plan
    assert "(tenant=? AND invoice_id=?)" in searches[2], plan


# Settings


def test_settings_are_put_and_read_back_and_replaced_whole(store: Store) -> None:
    assert store.get_settings(TENANT) is None
    first = DunningSettings(
        tenant=TENANT,
        policy_toml='[retry]\nmax_attempts = 4\nname = "é"\n',
        event_url="https://merchant.example/events",
        charge_url="https://merchant.example/charge",
        updated_at=T0,
    )
    assert store.put_settings(first) == first
    assert store.get_settings(TENANT) == first
    second = DunningSettings(
        tenant=TENANT, policy_toml=None, event_url=None, charge_url=None, updated_at=T0 + DAY
    )
    assert store.put_settings(second) == second
    assert store.get_settings(TENANT) == second
    assert store.get_settings("t2") is None
