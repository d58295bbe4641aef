"""Which pages refresh themselves (`recoup.api.dashboard.live`): a job counts as running work
while it runs or from a minute before it is due, never once it ended; an invoice while an
attempt is being asked (pending) or is due within the minute."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from hypothesis import given
from hypothesis import strategies as st

from recoup.api.dashboard.live import SOON, invoices_running, jobs_running
from recoup.dunning.invoice import AttemptRecord, AttemptState, InvoiceState
from recoup.jobs.model import JobState
from tests.api.dashboard.test_wording import T0, a_job
from tests.storage.test_dunning_store import invoice


@given(seconds=st.integers(-86_400, 86_400), state=st.sampled_from(list(JobState)))
def test_a_job_is_running_work_while_it_runs_or_is_due_within_the_minute(
    seconds: int, state: JobState
) -> None:
    job = replace(a_job(state), run_at=T0 + timedelta(seconds=seconds))
    expected = state is JobState.RUNNING or (
        state is JobState.SCHEDULED and timedelta(seconds=seconds) <= SOON
    )
    assert jobs_running([job], now=T0) is expected


@given(
    seconds=st.integers(-86_400, 86_400),
    attempt_state=st.sampled_from(list(AttemptState)),
    final=st.booleans(),
)
def test_an_invoice_is_running_work_while_an_attempt_is_asked_or_about_to_be(
    seconds: int, attempt_state: AttemptState, final: bool
) -> None:
    at = T0 + timedelta(seconds=seconds)
    attempt = AttemptRecord(attempt=1, at=at, state=attempt_state, job_id="j1")
    made = invoice(
        "inv_1",
        attempts=(attempt,),
        state=InvoiceState.RECOVERED if final else InvoiceState.RETRYING,
    )
    expected = not final and (
        attempt_state is AttemptState.PENDING
        or (attempt_state is AttemptState.SCHEDULED and at - T0 <= SOON)
    )
    assert invoices_running([made], now=T0) is expected
    assert jobs_running([], now=T0) is False and invoices_running([], now=T0) is False
