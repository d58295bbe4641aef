"""The Python API: validation at the edge, NotFound, cancellation, the exported surface."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import recoup.jobs
from recoup.errors import Conflict, InvalidInput, NotFound
from recoup.jobs.handlers import HandlerContext, HandlerRegistry
from recoup.jobs.model import HttpTarget, JobState, NewJob, PythonTarget
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.schedules.model import CronRule, NewSchedule
from recoup.jobs.ssrf import SsrfGuard, TargetRefused
from recoup.timekeeping.clock import VirtualClock

START = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
NOOP = PythonTarget(handler="noop")


def make(store: Any) -> Scheduler:
    return Scheduler(store, clock=VirtualClock(START))


def test_http_targets_are_checked_by_the_ssrf_guard_when_created(jobstore: Any) -> None:
    scheduler = make(jobstore)
    with pytest.raises(TargetRefused) as caught:
        scheduler.enqueue(HttpTarget(url="http://169.254.169.254/latest/meta-data/"))
    assert caught.value.rule == "link-local"
    with pytest.raises(TargetRefused):
        scheduler.enqueue(HttpTarget(url="gopher://example.com/"))
    with pytest.raises(InvalidInput):
        scheduler.enqueue(HttpTarget(url="https://93.184.216.34/", method="BREW"))
    assert jobstore.count_by_state().get(JobState.SCHEDULED, 0) == 0


def test_an_allowing_guard_accepts_private_targets(jobstore: Any) -> None:
    scheduler = Scheduler(jobstore, clock=VirtualClock(START), ssrf=SsrfGuard(allow_private=True))
    job = scheduler.enqueue(HttpTarget(url="http://127.0.0.1:8080/hook"))
    assert job.state is JobState.SCHEDULED


def test_run_at_delay_or_now(jobstore: Any) -> None:
    scheduler = make(jobstore)
    assert scheduler.enqueue(NOOP).run_at == START
    assert scheduler.enqueue(NOOP, delay=timedelta(minutes=5)).run_at == START + timedelta(
        minutes=5
    )
    at = datetime(2026, 7, 1, 9, 0, tzinfo=UTC)
    assert scheduler.enqueue(NOOP, run_at=at).run_at == at
    with pytest.raises(InvalidInput):
        scheduler.enqueue(NOOP, run_at=at, delay=timedelta(minutes=5))
    with pytest.raises(InvalidInput):
        scheduler.enqueue(NOOP, run_at=datetime(2026, 7, 1, 9, 0))  # naive


def test_names_are_unique_among_live_jobs_and_keys_return_the_same_job(jobstore: Any) -> None:
    scheduler = make(jobstore)
    first = scheduler.enqueue(NOOP, name="retry:inv_1:1", idempotency_key="retry:inv_1:1")
    again = scheduler.enqueue(NOOP, name="other", idempotency_key="retry:inv_1:1")
    assert again.id == first.id
    with pytest.raises(Conflict):
        scheduler.enqueue(NOOP, name="retry:inv_1:1")


def test_absent_jobs_and_schedules_are_not_found(jobstore: Any) -> None:
    scheduler = make(jobstore)
    for call in (
        lambda: scheduler.get("nope"),
        lambda: scheduler.get_by_name("nope"),
        lambda: scheduler.cancel("nope"),
        lambda: scheduler.get_schedule("nope"),
        lambda: scheduler.pause("nope"),
        lambda: scheduler.resume("nope"),
        lambda: scheduler.delete_schedule("nope"),
    ):
        with pytest.raises(NotFound):
            call()


def test_jobs_belong_to_their_tenant(jobstore: Any) -> None:
    scheduler = make(jobstore)
    job = scheduler.enqueue(NOOP, tenant="acme")
    with pytest.raises(NotFound):
        scheduler.get(job.id)
    assert scheduler.get(job.id, tenant="acme").id == job.id


def test_cancel_by_id_name_and_prefix(jobstore: Any) -> None:
    scheduler = make(jobstore)
    a = scheduler.enqueue(NOOP, name="retry:inv_1:1")
    scheduler.enqueue(NOOP, name="retry:inv_1:2")
    scheduler.enqueue(NOOP, name="retry:inv_2:1")
    assert scheduler.cancel(a.id).state is JobState.CANCELLED
    assert scheduler.cancel(a.id).state is JobState.CANCELLED  # idempotent
    assert scheduler.cancel_by_name("retry:inv_1:2") == 1
    assert scheduler.cancel_by_prefix("retry:inv_2:") == 1
    assert scheduler.list_jobs(state=JobState.SCHEDULED).jobs == []
    with pytest.raises(InvalidInput):
        scheduler.cancel_by_prefix("")


def test_listing_pages_with_a_cursor(jobstore: Any) -> None:
    scheduler = make(jobstore)
    ids = {scheduler.enqueue(NOOP).id for _ in range(5)}
    first = scheduler.list_jobs(limit=3)
    assert len(first.jobs) == 3 and first.next_cursor is not None
    second = scheduler.list_jobs(limit=3, cursor=first.next_cursor)
    assert {j.id for j in first.jobs + second.jobs} == ids


def test_an_embedded_worker_runs_what_is_enqueued(jobstore: Any) -> None:
    registry = HandlerRegistry()
    done = threading.Event()

    @registry.register("noop")
    def noop(ctx: HandlerContext) -> None:
        done.set()

    scheduler = Scheduler(jobstore)
    with scheduler.running_worker(handlers=registry, grace=timedelta(seconds=1)):
        job = scheduler.enqueue(NOOP)
        assert done.wait(5)
    assert scheduler.get(job.id).state is JobState.SUCCEEDED


def test_the_handler_registry_refuses_duplicates_and_async_inline() -> None:
    registry = HandlerRegistry()
    registry.add("a", lambda ctx: None)
    with pytest.raises(InvalidInput):
        registry.add("a", lambda ctx: None)

    async def coroutine(ctx: HandlerContext) -> None:
        return None

    with pytest.raises(InvalidInput):
        registry.add("b", coroutine, inline=True)
    assert list(registry) == ["a"] and "a" in registry and len(registry) == 1


def test_the_exported_names_are_the_intended_ones() -> None:
    assert sorted(recoup.jobs.__all__, key=str.lower) == sorted(
        [
            "DEFAULT_TENANT",
            "AnchorRule",
            "Completion",
            "CronRule",
            "HandlerContext",
            "HandlerRegistry",
            "HttpTarget",
            "Job",
            "JobState",
            "JobStore",
            "MissedPolicy",
            "NewJob",
            "NewSchedule",
            "PermanentError",
            "PythonTarget",
            "BackoffPolicy",
            "Rule",
            "Run",
            "RunOutcome",
            "Schedule",
            "ScheduleStore",
            "Scheduler",
            "SsrfGuard",
            "Target",
            "TargetRefused",
            "Tenant",
            "Worker",
        ],
        key=str.lower,
    )
    for name in recoup.jobs.__all__:
        assert hasattr(recoup.jobs, name)


def test_the_default_tenant_gets_a_signing_secret_and_its_jobs_go_out_signed(
    database: Any, receiver: Any
) -> None:
    # Embedded use, no HTTP service and no `recoup tenants create`: the first job of the
    # default tenant makes its whsec_ secret, and the worker signs with it.
    from standardwebhooks import Webhook

    from recoup.jobs.model import DEFAULT_TENANT

    jobstore = database.open()  # not the `jobstore` fixture, which makes the tenant itself
    assert jobstore.get_tenant(DEFAULT_TENANT) is None
    scheduler = Scheduler(jobstore, ssrf=SsrfGuard(allow_private=True))
    with scheduler.running_worker(grace=timedelta(seconds=1)):
        scheduler.enqueue(HttpTarget(url=receiver.url, body={"invoice": "inv_1"}))
        (request,) = receiver.wait_for(1)
    tenant = jobstore.get_tenant(DEFAULT_TENANT)
    assert tenant is not None and tenant.signing_secret.startswith("whsec_")
    assert Webhook(tenant.signing_secret).verify(request.body, request.headers) == {
        "invoice": "inv_1"
    }
    # Idempotent: another scheduler (another process) finds the same secret.
    assert Scheduler(jobstore).default_tenant().signing_secret == tenant.signing_secret


@pytest.mark.parametrize(
    ("target", "field"),
    [
        (
            HttpTarget(url="https://93.184.216.34/", headers={"X-A": "1\r\nX-B: 2"}),
            "target.headers",
        ),
        (HttpTarget(url="https://93.184.216.34/", headers={"X A": "1"}), "target.headers"),
        (HttpTarget(url="https://93.184.216.34/a b"), "target.url"),
        (HttpTarget(url="https://93.184.216.34/\x00"), "target.url"),
    ],
)
def test_embedded_users_get_the_same_target_checks_as_the_api(
    jobstore: Any, target: HttpTarget, field: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        make(jobstore).enqueue(target)
    assert caught.value.field == field
    assert jobstore.count_by_state().get(JobState.SCHEDULED, 0) == 0


@pytest.mark.parametrize(
    "name",
    ["Host", "host", "CONTENT-LENGTH", "Transfer-Encoding", "connection", "Idempotency-Key",
     "webhook-id", "Webhook-Timestamp", "WEBHOOK-SIGNATURE"],
)  # fmt: skip
def test_reserved_headers_are_refused_in_any_case_naming_the_header(
    jobstore: Any, name: str
) -> None:
    target = HttpTarget(url="https://93.184.216.34/", headers={name: "x"})
    with pytest.raises(InvalidInput) as caught:
        make(jobstore).enqueue(target)
    assert caught.value.field == "target.headers" and caught.value.value == name
    assert name in str(caught.value)
    with pytest.raises(InvalidInput):
        make(jobstore).create_schedule(
            NewSchedule(name="n", rule=CronRule(expression="* * * * *", timezone="UTC"),
                        target=target)
        )  # fmt: skip
    assert jobstore.count_by_state().get(JobState.SCHEDULED, 0) == 0


def test_a_one_off_job_named_like_an_occurrence_is_refused_naming_name(jobstore: Any) -> None:
    # `nightly@…` is what the schedule "nightly" names its occurrences: a one-off job holding
    # that live name would make the occurrence's insert a silent no-op.
    scheduler = make(jobstore)
    with pytest.raises(InvalidInput) as caught:
        scheduler.enqueue(NOOP, name="nightly@2026-03-01T12:00:00Z")
    assert caught.value.field == "name"
    assert jobstore.count_by_state().get(JobState.SCHEDULED, 0) == 0
    assert scheduler.enqueue(NOOP, name="nightly-2026-03-01").name == "nightly-2026-03-01"


def test_an_existing_schedule_id_is_returned_and_its_first_job_made_when_existing_ok(
    jobstore: Any,
) -> None:
    # An earlier try of the same request stored the schedule, then stopped before making its
    # first job (the two are separate transactions).
    scheduler = make(jobstore)
    every_minute = NewSchedule(
        name="minutely", rule=CronRule(expression="* * * * *", timezone="UTC"), target=NOOP
    )
    first_fire = START + timedelta(minutes=1)
    stored = jobstore.insert_schedule(every_minute, next_fire_at=first_fire, now=START)
    with pytest.raises(Conflict):
        scheduler.create_schedule(every_minute)
    again = scheduler.create_schedule(every_minute, existing_ok=True)
    assert again.id == stored.id and again.created_at == stored.created_at
    (first_job,) = scheduler.list_jobs(schedule_id=stored.id).jobs
    assert first_job.run_at == first_fire
    assert scheduler.create_schedule(every_minute, existing_ok=True).id == stored.id
    assert len(scheduler.list_jobs(schedule_id=stored.id).jobs) == 1


def test_an_extreme_run_at_is_refused_naming_run_at(jobstore: Any) -> None:
    extreme = datetime.fromisoformat("0001-01-01T00:00:00+14:00")
    with pytest.raises(InvalidInput) as caught:
        make(jobstore).enqueue(NOOP, run_at=extreme)
    assert caught.value.field == "run_at"


def test_the_bulk_path_holds_jobs_to_the_same_rules_and_stores_nothing_of_a_bad_batch(
    jobstore: Any,
) -> None:
    scheduler = make(jobstore)
    good = NewJob(run_at=START, target=NOOP, name="fine")
    for bad, field in (
        (NewJob(run_at=START, target=NOOP, name="a@2026-06-01T12:00:00Z"), "name"),
        (NewJob(run_at=START, target=NOOP, name="tab\there"), "name"),
        (NewJob(run_at=START, target=NOOP, group="line\nbreak"), "group"),
        (
            NewJob(run_at=START, target=HttpTarget(url="https://93.184.216.34/", method="BREW")),
            "target.method",
        ),
    ):
        with pytest.raises(InvalidInput) as caught:
            scheduler.insert_many_checked([good, bad], now=START)
        assert caught.value.field == field
    assert jobstore.count_by_state().get(JobState.SCHEDULED, 0) == 0


def test_the_bulk_path_stamps_the_callers_instant_and_skips_what_exists(jobstore: Any) -> None:
    scheduler = make(jobstore)
    at = START - timedelta(minutes=3)  # a unit of work's `now`, taken before it began
    job = NewJob(run_at=START, target=NOOP, idempotency_key="k1")
    assert scheduler.insert_many_checked([job], now=at) == 1
    assert scheduler.insert_many_checked([job], now=START) == 0
    assert scheduler.get(job.id).created_at == at
    assert scheduler.insert_many_checked([], now=START) == 0
