"""A charge URL the SSRF guard refuses at fire time (a host that resolves elsewhere since the
invoice was opened: DNS rebinding) fails its attempt at once, on both backends: a permanent
error in the run log, the attempt errored for the lifecycle (the last one exhausts the invoice),
an event; never "ask again" for days (issue 24)."""

from __future__ import annotations

import asyncio

import pytest

from recoup.dunning.invoice import AttemptState
from recoup.jobs.handlers import HandlerContext, PermanentError
from recoup.jobs.ssrf import SsrfGuard
from recoup.jobs.targets import AttemptOutcome, AttemptResult
from recoup.recovery.attempts import AttemptRunner, _read_answer
from tests.recovery.conftest import Runtime


def test_a_refused_request_is_errored_not_asked_again() -> None:
    refused = AttemptResult(
        AttemptOutcome.FAILED, error="TargetRefused: 127.0.0.1 is a loopback address"
    )
    outcome, codes, detail = _read_answer(refused)
    assert outcome == "errored" and codes == (None, None)
    assert detail is not None and "TargetRefused" in detail
    # Transport trouble without a status stays "ask again".
    reset = AttemptResult(AttemptOutcome.RETRY, error="ClientConnectionError: reset")
    assert _read_answer(reset)[0] is None


def test_a_charge_url_refused_at_fire_time_errors_the_attempt_at_once(runtime: Runtime) -> None:
    invoice = runtime.fail("inv_r", "fp_r")
    first = invoice.attempts[0]
    runtime.clock.set(first.at)
    job = runtime.store.get("default", first.job_id)
    assert job is not None
    runtime.dunning.scheduler.ssrf = SsrfGuard()  # the default guard: loopback refused
    runner = AttemptRunner(runtime.dunning)
    ctx = HandlerContext(
        job_id=job.id,
        tenant="default",
        name=job.name,
        attempt=1,
        payload=job.payload,
        idempotency_key=job.idempotency_key,
        run_at=job.run_at,
    )
    with pytest.raises(PermanentError, match="refused"):
        asyncio.run(runner.attempt(ctx))
    after = runtime.invoice("inv_r")
    assert after.attempt(first.attempt).state is AttemptState.ERRORED  # type: ignore[union-attr]
    assert runtime.side.requests == []  # nothing reached the endpoint
    notes = [
        e
        for e in runtime.store.invoice_events("default", "inv_r")
        if e.type == "note.attempt_errored"
    ]
    assert len(notes) == 1 and "refused" in str(notes[0].data.get("detail"))
