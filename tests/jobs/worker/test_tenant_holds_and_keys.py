"""What the worker does with a tenant's life: a disabled tenant's jobs and schedule occurrences
wait (held) and run once it is enabled; a rotated signing secret signs beside the previous
one until the overlap ends (Standard Webhooks: several `v1,` entries, space-separated)."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime, timedelta
from typing import Any

from standardwebhooks import Webhook

from recoup.jobs.handlers import HandlerContext, HandlerRegistry
from recoup.jobs.model import DEFAULT_TENANT, HttpTarget, JobState, PythonTarget, Tenant
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.schedules.model import CronRule, MissedPolicy, NewSchedule
from recoup.jobs.ssrf import SsrfGuard
from recoup.jobs.targets import AttemptOutcome, HttpExecutor
from recoup.jobs.time_travel import TestClock
from recoup.receiver.errors import SignatureError
from recoup.receiver.signatures import verify_signature
from recoup.tenancy import new_tenant, rotate_signing_secret
from recoup.timekeeping.clock import VirtualClock
from tests.jobs.support import SECRET, Receiver
from tests.jobs.test_targets import make_job

START = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
OPEN = SsrfGuard(allow_private=True)


def harness(store: Any) -> tuple[Scheduler, TestClock, list[tuple[str, datetime]]]:
    clock = VirtualClock(START)
    registry = HandlerRegistry()
    fired: list[tuple[str, datetime]] = []

    @registry.register("tick", inline=True)
    def tick(ctx: HandlerContext) -> None:
        fired.append((ctx.tenant, clock.now()))

    scheduler = Scheduler(store, clock=clock, ssrf=OPEN)
    worker = scheduler.worker(
        handlers=registry, schedule_horizon=timedelta(minutes=1), rng=random.Random(0)
    )
    return scheduler, TestClock(clock, worker, store, schedules=store), fired


def test_a_disabled_tenants_jobs_wait_and_run_once_it_is_enabled(jobstore: Any) -> None:
    for name in ("acme", "other"):
        jobstore.ensure_tenant(new_tenant(name, now=START))
    scheduler, test_clock, fired = harness(jobstore)
    tick = PythonTarget(handler="tick")
    held = [
        scheduler.enqueue(tick, tenant="acme", run_at=START + timedelta(minutes=m))
        for m in (10, 20)
    ]
    scheduler.enqueue(tick, tenant="other", run_at=START + timedelta(minutes=15))
    jobstore.set_tenant_disabled("acme", disabled=True, now=START)

    test_clock.advance(timedelta(hours=2))
    assert fired == [("other", START + timedelta(minutes=15))]
    assert all(scheduler.get(j.id, tenant="acme").state is JobState.SCHEDULED for j in held)

    jobstore.set_tenant_disabled("acme", disabled=False, now=START + timedelta(hours=2))
    test_clock.advance(timedelta(seconds=1))
    # Both were overdue: they run now, in order (a test clock runs each at its own instant).
    assert fired[1:] == [
        ("acme", START + timedelta(minutes=10)),
        ("acme", START + timedelta(minutes=20)),
    ]
    assert all(scheduler.get(j.id, tenant="acme").state is JobState.SUCCEEDED for j in held)


def test_a_disabled_tenants_schedule_does_not_fire_and_follows_its_missed_policy_after(
    jobstore: Any,
) -> None:
    jobstore.ensure_tenant(new_tenant("acme", now=START))
    scheduler, test_clock, fired = harness(jobstore)
    scheduler.create_schedule(
        NewSchedule(
            name="hourly",
            rule=CronRule(expression="30 * * * *", timezone="UTC"),
            target=PythonTarget(handler="tick"),
            missed=MissedPolicy.RUN_ONCE,
            tenant="acme",
        )
    )
    jobstore.set_tenant_disabled("acme", disabled=True, now=START)
    test_clock.advance(timedelta(hours=3))  # 12:30, 13:30, 14:30 pass while disabled
    assert fired == []

    jobstore.set_tenant_disabled("acme", disabled=False, now=START + timedelta(hours=3))
    test_clock.advance(timedelta(hours=1))
    # run_once: of 12:30, 13:30 and 14:30, missed while disabled, only the latest runs; then
    # the schedule as usual (15:30).
    assert [at for _, at in fired] == [
        START + timedelta(hours=2, minutes=30),
        START + timedelta(hours=3, minutes=30),
    ]


def _rotating(now: datetime, *, until: datetime) -> Tenant:
    return Tenant(
        id="acme",
        name="acme",
        signing_secret="whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldY",
        created_at=now,
        previous_signing_secret=SECRET,
        previous_secret_until=until,
    )


def _send(tenant: Tenant, receiver: Receiver, sent_at: datetime) -> Any:
    async def go() -> Any:
        executor = HttpExecutor(guard=OPEN, wall_clock=lambda: sent_at)
        try:
            return await executor.send(
                make_job(HttpTarget(url=receiver.url, body={"n": 1})), secret=tenant
            )
        finally:
            await executor.aclose()

    result = asyncio.run(go())
    assert result.outcome is AttemptOutcome.SUCCEEDED
    return receiver.requests[-1]


def test_during_the_overlap_a_request_carries_both_signatures(receiver: Receiver) -> None:
    now = datetime.now(UTC)
    tenant = _rotating(now, until=now + timedelta(hours=1))
    request = _send(tenant, receiver, now)
    entries = request.headers["webhook-signature"].split(" ")
    assert len(entries) == 2 and all(e.startswith("v1,") for e in entries)
    for secret in (tenant.signing_secret, SECRET):
        # The reference library and ours each accept it with either secret alone.
        assert Webhook(secret).verify(request.body, request.headers) == {"n": 1}
        verify_signature(request.headers, request.body, secret=secret, now=now)


def test_after_the_overlap_only_the_new_secret_signs(receiver: Receiver) -> None:
    now = datetime.now(UTC)
    tenant = _rotating(now, until=now)  # the overlap ended at this very instant
    request = _send(tenant, receiver, now)
    assert " " not in request.headers["webhook-signature"]
    verify_signature(request.headers, request.body, secret=tenant.signing_secret, now=now)
    try:
        verify_signature(request.headers, request.body, secret=SECRET, now=now)
    except SignatureError:
        pass
    else:
        raise AssertionError("the replaced secret still verifies after the overlap")


def test_the_worker_signs_with_both_secrets_after_a_rotation(
    jobstore: Any, receiver: Receiver
) -> None:
    rotated = rotate_signing_secret(
        jobstore, DEFAULT_TENANT, now=datetime.now(UTC), overlap=timedelta(hours=1)
    )
    assert rotated is not None and rotated.previous_signing_secret == SECRET
    scheduler = Scheduler(jobstore, clock=VirtualClock(START), ssrf=OPEN)
    scheduler.enqueue(HttpTarget(url=receiver.url, body={"invoice": "inv_1"}), run_at=START)
    assert scheduler.worker(rng=random.Random(1)).drain() == 1
    (request,) = receiver.requests
    assert len(request.headers["webhook-signature"].split(" ")) == 2
    for secret in (rotated.signing_secret, SECRET):
        assert Webhook(secret).verify(request.body, request.headers) == {"invoice": "inv_1"}
    # One more rotation without overlap: the next delivery is signed with the newest alone.
    newest = rotate_signing_secret(
        jobstore, DEFAULT_TENANT, now=datetime.now(UTC), overlap=timedelta(0)
    )
    assert newest is not None
    scheduler.enqueue(HttpTarget(url=receiver.url, body={"invoice": "inv_2"}), run_at=START)
    assert scheduler.worker(rng=random.Random(1)).drain() == 1
    last = receiver.requests[-1]
    assert " " not in last.headers["webhook-signature"]
    assert Webhook(newest.signing_secret).verify(last.body, last.headers) == {"invoice": "inv_2"}
