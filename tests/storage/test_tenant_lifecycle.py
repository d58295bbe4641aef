"""A tenant's life after creation, on both backends: disabled (jobs held, schedules stopped,
tokens refused), enabled again, deleted with every row of it in one transaction, its signing
secret rotated; SQLite with foreign keys on."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

import pytest

from recoup.analytics.recovery import MerchantTag
from recoup.dunning.invoice import AttemptState
from recoup.errors import Conflict, InvalidInput, StorageError
from recoup.jobs.model import DEFAULT_TENANT, JobState, RunOutcome, Tenant
from recoup.jobs.schedules.model import CronRule, MissedPolicy, NewSchedule
from recoup.jobs.store import ScheduleFilter
from recoup.recovery.customer_store import Renewal, RenewalState
from recoup.recovery.email_store import Email, EmailState, MessageSettings
from recoup.recovery.hosted_store import HostedCharge, HostedChargeState, HostedCharging
from recoup.recovery.intake_store import IntakeEvent, IntakeSettings
from recoup.recovery.store import DunningSettings
from recoup.sealed import SecretBox, new_key
from recoup.storage import open_api_tables
from recoup.storage.tenant_tables import TENANT_TABLES
from recoup.tenancy import (
    ActionSubject,
    OperatorAction,
    TokenOwner,
    authenticate,
    delete_tenant,
    disable_tenant,
    enable_tenant,
    hash_token,
    identify,
    issue_token,
    new_tenant,
    rotate_signing_secret,
)
from tests.storage.conftest import Backend, Store
from tests.storage.test_dunning_store import attempt, event, invoice
from tests.storage.test_store_contract import SECOND, T0, claim, job, report

HOUR = timedelta(hours=1)
SEALED_KEY = SecretBox([new_key()]).seal("rk_test_tenant")


def tenant(store: Store, tenant_id: str) -> Tenant:
    return store.ensure_tenant(new_tenant(tenant_id, now=T0))


def disable(store: Store, tenant_id: str, at: datetime = T0) -> Tenant:
    found = store.set_tenant_disabled(tenant_id, disabled=True, now=at)
    assert found is not None
    return found


def enable(store: Store, tenant_id: str) -> Tenant:
    found = store.set_tenant_disabled(tenant_id, disabled=False, now=T0)
    assert found is not None
    return found


# Disabling and enabling


def test_a_disabled_tenants_jobs_are_held_and_the_others_still_run(store: Store) -> None:
    tenant(store, "a")
    tenant(store, "b")
    held = [store.insert(job(tenant="a", run_at=T0 - n * SECOND), now=T0) for n in range(3)]
    other = store.insert(job(tenant="b"), now=T0)
    disable(store, "a")

    assert [j.id for j in claim(store, now=T0 + HOUR)] == [other.id]
    assert claim(store, now=T0 + HOUR) == []
    # Held jobs are scheduled still (nothing failed or cancelled), but due for no worker.
    assert all(store.get("a", j.id).state is JobState.SCHEDULED for j in held)
    assert store.count_live()[JobState.SCHEDULED] == 3
    assert store.due_backlog(T0 + HOUR) == 0
    assert store.next_due_at() is None

    enable(store, "a")
    assert store.next_due_at() == T0 - 2 * SECOND
    assert store.due_backlog(T0 + HOUR) == 3
    released = claim(store, now=T0 + HOUR)
    assert [j.id for j in released] == [j.id for j in reversed(held)]  # in run_at order
    assert all(j.attempts == 1 for j in released)  # holding spent no attempt


def test_the_next_due_job_is_found_in_the_index_of_due_jobs(backend: Backend) -> None:
    # Held jobs are outside jobs_due; what is left to find stays an index walk, however many
    # finished or held rows the table holds.
    backend.open()  # migrated
    for query in ("next_due_at", "count_live"):
        plan = backend.plan(query)
        assert "jobs_due" in plan, plan
        assert "Seq Scan on jobs" not in plan and not any(
            line.endswith("SCAN jobs") for line in plan.split("\n")
        ), plan
    assert "jobs_held" in backend.plan("count_live")


def test_a_job_scheduled_again_while_its_tenant_is_disabled_is_not_claimed(store: Store) -> None:
    # Not marked held (an insert or a retry after the disable): the claim skips it anyway.
    tenant(store, "a")
    running = store.insert(job(tenant="a"), now=T0)
    (claimed,) = claim(store)
    disable(store, "a")
    late = store.insert(job(tenant="a"), now=T0)
    store.complete_many([report(claimed, RunOutcome.RETRY, retry_at=T0 + SECOND)], now=T0 + SECOND)
    assert store.get("a", running.id).state is JobState.SCHEDULED
    assert claim(store, now=T0 + HOUR) == []
    assert store.next_due_at() is None

    enable(store, "a")
    assert {j.id for j in claim(store, now=T0 + HOUR)} == {running.id, late.id}


def test_disabling_twice_keeps_the_first_instant_and_unknown_tenants_are_none(
    store: Store,
) -> None:
    tenant(store, "a")
    first = disable(store, "a", T0)
    assert first.disabled and first.disabled_at == T0
    assert disable(store, "a", T0 + HOUR).disabled_at == T0
    assert store.get_tenant("a") == first
    assert not enable(store, "a").disabled
    assert not enable(store, "a").disabled  # idempotent too
    assert store.set_tenant_disabled("nobody", disabled=True, now=T0) is None
    assert store.set_tenant_disabled("nobody", disabled=False, now=T0) is None


def test_enabling_a_tenant_with_held_jobs_wakes_idle_workers(store: Store) -> None:
    tenant(store, "a")
    store.insert(job(tenant="a"), now=T0)
    disable(store, "a")
    while store.wait_for_notify(0):  # (PostgreSQL: starts listening) consume the insert's
        pass
    woken: list[bool] = []
    waiter = threading.Thread(target=lambda: woken.append(store.wait_for_notify(10.0)))
    waiter.start()
    # Only enabling notifies (disabling does not); enable until the waiter, whenever it began
    # to wait, has seen one.
    for _ in range(1000):
        enable(store, "a")
        waiter.join(0.01)
        if not waiter.is_alive():
            break
        disable(store, "a")
    waiter.join()
    assert woken == [True]


def test_a_disabled_tenants_schedules_do_not_fire(store: Store) -> None:
    tenant(store, "a")
    tenant(store, "b")
    for owner in ("a", "b"):
        store.insert_schedule(
            NewSchedule(
                tenant=owner,
                name="hourly",
                rule=CronRule(expression="0 * * * *", timezone="UTC"),
                target=job().target,
                missed=MissedPolicy.RUN_ONCE,
            ),
            next_fire_at=T0,
            now=T0,
        )
    disable(store, "a")
    due = store.due_schedules(now=T0, horizon=HOUR, limit=10)
    assert [s.tenant for s in due] == ["b"]
    enable(store, "a")
    assert {s.tenant for s in store.due_schedules(now=T0, horizon=HOUR, limit=10)} == {"a", "b"}


def test_a_disabled_tenants_tokens_are_refused_at_once(store: Store) -> None:
    tables = open_api_tables(store)
    tenant(store, "a")
    issued = issue_token(tables, "a", now=T0)
    assert authenticate(tables, issued.secret) == "a"
    disable(store, "a")
    assert identify(tables, issued.secret) == TokenOwner(tenant="a", disabled=True)
    assert authenticate(tables, issued.secret) is None
    enable(store, "a")
    assert authenticate(tables, issued.secret) == "a"


def test_the_default_tenant_is_neither_disabled_nor_deleted(store: Store) -> None:
    tenant(store, DEFAULT_TENANT)
    with pytest.raises(InvalidInput, match="embedded"):
        disable_tenant(store, DEFAULT_TENANT, now=T0)
    with pytest.raises(InvalidInput, match="embedded"):
        delete_tenant(store, DEFAULT_TENANT)
    assert store.get_tenant(DEFAULT_TENANT) is not None
    assert not store.get_tenant(DEFAULT_TENANT).disabled
    assert enable_tenant(store, DEFAULT_TENANT, now=T0) is not None  # harmless


# Deleting


def populate(store: Store, tenant_id: str) -> None:
    """One row of the tenant in every table that holds tenants' rows."""
    tables = open_api_tables(store)
    tenant(store, tenant_id)
    finished = store.insert(job(tenant=tenant_id), now=T0)
    (claimed,) = claim(store)
    store.complete_many([report(claimed, RunOutcome.SUCCEEDED)], now=T0)
    assert store.runs(tenant_id, finished.id)
    store.insert(job(tenant=tenant_id, run_at=T0 + HOUR), now=T0)
    store.insert_schedule(
        NewSchedule(
            tenant=tenant_id,
            name="daily",
            rule=CronRule(expression="0 9 * * *", timezone="UTC"),
            target=job().target,
        ),
        next_fire_at=T0 + HOUR,
        now=T0,
    )
    issue_token(tables, tenant_id, now=T0)
    tables.begin(
        tenant=tenant_id, key="k1", fingerprint="f", method="POST", path="/v1/jobs", now=T0
    )
    tables.record_action(
        OperatorAction(
            tenant=tenant_id,
            subject=ActionSubject.JOB,
            subject_id="j1",
            action="cancel",
            who="ops",
            at=T0,
        )
    )
    store.create_invoice(
        invoice(
            "inv_1",
            tenant=tenant_id,
            attempts=(attempt("inv_1", 1, state=AttemptState.SCHEDULED, tenant=tenant_id),),
        ),
        [event("inv_1", 1, tenant=tenant_id)],
    )
    store.put_settings(
        DunningSettings(
            tenant=tenant_id, policy_toml=None, event_url=None, charge_url=None, updated_at=T0
        )
    )
    store.put_merchant_tag(
        tenant_id, MerchantTag(merchant_id="m_1", tag="seasonal", note="", tagged_at=T0)
    )
    store.put_intake_settings(
        IntakeSettings(
            tenant=tenant_id, stripe_webhook_secret=None, default_timezone="UTC", updated_at=T0
        )
    )
    store.claim_event(
        IntakeEvent(
            tenant=tenant_id,
            provider="stripe",
            event_id="evt_1",
            type="invoice.payment_failed",
            invoice_id="inv_1",
            occurred_at=T0,
        ),
        now=T0,
        lock_timeout=HOUR,
    )
    store.hosted.put_hosted_charging(
        HostedCharging(tenant=tenant_id, provider="stripe", api_key=SEALED_KEY, updated_at=T0)
    )
    store.hosted.begin_hosted_charge(
        HostedCharge(
            tenant=tenant_id,
            charge_key="charge:inv_1:1",
            invoice_id="inv_1",
            attempt=1,
            state=HostedChargeState.PENDING,
            created_at=T0,
            updated_at=T0,
        )
    )
    store.messages.put_message_settings(
        MessageSettings(
            tenant=tenant_id,
            smtp_url=SEALED_KEY,
            email_from="billing@example.com",
            reply_to=None,
            update_card_url=None,
            templates_dir=None,
            allow_unsubscribe=False,
            updated_at=T0,
        )
    )
    store.messages.plan_email(
        Email(
            tenant=tenant_id,
            key="k1",
            kind="payment_failed",
            customer_id="cus_1",
            invoice_id="inv_1",
            send_at=T0,
            state=EmailState.PLANNED,
            created_at=T0,
            updated_at=T0,
        )
    )
    store.customers.put_customer(tenant_id, "cus_1", email="ada@example.com", at=T0)
    store.customers.put_renewal(
        Renewal(
            tenant=tenant_id,
            renewal_id="ren_1",
            customer_id="cus_1",
            renews_at=T0 + HOUR,
            amount=1200,
            currency="usd",
            timezone="UTC",
            exp_month=1,
            exp_year=2030,
            state=RenewalState.NO_REMINDER,
            created_at=T0,
            updated_at=T0,
        )
    )
    store.messages.put_payment_page(tenant_id, "inv_1", "https://pay.example/inv_1", at=T0)


def test_deleting_a_tenant_removes_every_row_of_it_and_nothing_else(store: Store) -> None:
    populate(store, "gone")
    populate(store, "kept")
    tables = open_api_tables(store)
    kept_tokens = tables.list_tokens("kept")
    disable(store, "gone")

    deleted = delete_tenant(store, "gone")
    assert deleted is not None
    assert list(deleted) == list(TENANT_TABLES)
    assert deleted == {
        "invoice_attempts": 1,
        "invoice_events": 1,
        "invoices": 1,
        "dunning_settings": 1,
        "merchant_tags": 1,
        "intake_events": 1,
        "intake_settings": 1,
        "hosted_charges": 1,
        "hosted_charging": 1,
        "emails": 1,
        "message_settings": 1,
        "payment_pages": 1,
        "customers": 1,
        "renewals": 1,
        "idempotency_keys": 1,
        "operator_actions": 1,  # 0017
        "api_tokens": 1,
        "runs": 1,
        "jobs": 2,
        "schedules": 1,
        "flow_keys": 0,  # none: populate makes no flow key
        "tenants": 1,
    }
    assert store.get_tenant("gone") is None
    assert sum(store.count_by_state("gone").values()) == 0
    assert store.list_schedules(ScheduleFilter(tenant="gone")).schedules == []
    assert tables.list_tokens("gone") == []
    assert tables.actions_on("gone", ActionSubject.JOB, "j1") == []
    assert store.get_invoice("gone", "inv_1") is None
    assert store.invoice_events("gone", "inv_1") == []
    assert store.get_settings("gone") is None
    assert store.merchant_tags("gone") == []
    assert store.get_intake_settings("gone") is None
    assert store.customers.get_customer("gone", "cus_1") is None
    assert store.customers.get_renewal("gone", "ren_1") is None
    assert store.customers.get_customer("kept", "cus_1") is not None
    # The other tenant is whole.
    assert store.get_tenant("kept") is not None
    assert sum(store.count_by_state("kept").values()) == 2
    assert len(store.list_schedules(ScheduleFilter(tenant="kept")).schedules) == 1
    assert tables.list_tokens("kept") == kept_tokens
    assert len(tables.actions_on("kept", ActionSubject.JOB, "j1")) == 1
    assert store.get_invoice("kept", "inv_1") is not None
    assert store.get_settings("kept") is not None
    assert len(store.merchant_tags("kept")) == 1
    assert store.get_intake_settings("kept") is not None
    assert delete_tenant(store, "gone") is None


def test_a_deleted_tenants_idempotency_keys_and_tokens_are_gone(store: Store) -> None:
    tables = open_api_tables(store)
    tenant(store, "a")
    issued = issue_token(tables, "a", now=T0)
    disable(store, "a")
    delete_tenant(store, "a")
    assert identify(tables, issued.secret) is None
    assert tables.token_owner(hash_token(issued.secret)) is None
    # The name is free again; a new tenant of that name starts empty.
    tenant(store, "a")
    outcome = tables.begin(
        tenant="a", key="k1", fingerprint="f", method="POST", path="/v1/jobs", now=T0
    )
    assert type(outcome).__name__ == "New"


def test_an_enabled_tenant_is_not_deleted(store: Store) -> None:
    populate(store, "a")
    with pytest.raises(Conflict, match="disable it first"):
        delete_tenant(store, "a")
    assert store.get_tenant("a") is not None
    assert sum(store.count_by_state("a").values()) == 2


def test_a_tenant_with_an_attempt_running_is_not_deleted(store: Store) -> None:
    tenant(store, "a")
    store.insert(job(tenant="a"), now=T0)
    (claimed,) = claim(store)
    disable(store, "a")
    with pytest.raises(Conflict, match="running"):
        delete_tenant(store, "a")
    assert store.get("a", claimed.id) is not None
    store.complete_many([report(claimed, RunOutcome.SUCCEEDED)], now=T0 + SECOND)
    assert delete_tenant(store, "a") == {
        **dict.fromkeys(TENANT_TABLES, 0),
        "runs": 1,
        "jobs": 1,
        "tenants": 1,
    }


def test_every_table_with_tenants_rows_is_deleted_from(backend: Backend, store: Store) -> None:
    # A table added later with a `tenant` column must join TENANT_TABLES (and its delete block).
    columns, _ = backend.describe()
    with_tenants = {table for table, names in columns.items() if "tenant" in names}
    assert with_tenants | {"tenants"} == set(TENANT_TABLES)


def test_foreign_keys_hold_on_every_backend(store: Store) -> None:
    tables = open_api_tables(store)
    with pytest.raises(StorageError):
        issue_token(tables, "no-such-tenant", now=T0)
    with pytest.raises(StorageError):
        tables.begin(
            tenant="no-such-tenant", key="k", fingerprint="f", method="POST", path="/", now=T0
        )


# Rotating the signing secret


def test_a_rotated_secret_signs_beside_the_previous_one_until_the_overlap_ends(
    store: Store,
) -> None:
    before = tenant(store, "a")
    rotated = rotate_signing_secret(store, "a", now=T0, overlap=timedelta(hours=24))
    assert rotated is not None
    assert rotated.signing_secret != before.signing_secret
    assert rotated.signing_secret.startswith("whsec_")
    assert rotated.previous_signing_secret == before.signing_secret
    assert rotated.previous_secret_until == T0 + timedelta(hours=24)
    assert store.get_tenant("a") == rotated
    new, old = rotated.signing_secret, before.signing_secret
    assert rotated.signing_secrets(T0) == (new, old)
    assert rotated.signing_secrets(T0 + timedelta(hours=24) - SECOND) == (new, old)
    assert rotated.signing_secrets(T0 + timedelta(hours=24)) == (new,)

    # Rotating again within the overlap: the oldest secret stops signing.
    again = rotate_signing_secret(store, "a", now=T0 + HOUR, overlap=timedelta(hours=1))
    assert again is not None
    assert again.signing_secrets(T0 + HOUR) == (again.signing_secret, new)


def test_a_rotation_without_overlap_replaces_the_secret_at_once(store: Store) -> None:
    tenant(store, "a")
    rotate_signing_secret(store, "a", now=T0, overlap=timedelta(hours=1))
    rotated = rotate_signing_secret(store, "a", now=T0, overlap=timedelta(0))
    assert rotated is not None
    assert rotated.previous_signing_secret is None and rotated.previous_secret_until is None
    assert rotated.signing_secrets(T0) == (rotated.signing_secret,)
    assert rotate_signing_secret(store, "nobody", now=T0) is None


@pytest.mark.parametrize("overlap", [timedelta(seconds=-1), timedelta(days=30, seconds=1)])
def test_an_overlap_out_of_range_is_invalid_input(store: Store, overlap: timedelta) -> None:
    before = tenant(store, "a")
    with pytest.raises(InvalidInput, match="overlap"):
        rotate_signing_secret(store, "a", now=T0, overlap=overlap)
    assert store.get_tenant("a") == before


def test_listing_tenants_shows_their_state_and_never_a_whole_secret(store: Store) -> None:
    a = tenant(store, "a")
    tenant(store, "b")
    disable(store, "b", T0 + HOUR)
    rotated = rotate_signing_secret(store, "a", now=T0, overlap=HOUR)
    assert rotated is not None
    listed = {t.id: t for t in store.list_tenants()}
    assert listed["a"].disabled_at is None and listed["a"].rotating_until == T0 + HOUR
    assert listed["b"].disabled_at == T0 + HOUR and listed["b"].rotating_until is None
    assert listed["a"].secret_prefix == rotated.signing_secret[:10]
    for info in listed.values():
        assert a.signing_secret not in repr(info) and rotated.signing_secret not in repr(info)
