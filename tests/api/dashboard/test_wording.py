"""The dashboard's words for runs and attempts (`recoup.api.dashboard.wording`): no class
name reaches a page, a retry says when it was tried again, a redrive is marked, a job ends
when its last run ended."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from recoup.api.dashboard.wording import (
    action_sentence,
    finished_at,
    plain_error,
    run_log,
    run_sentence,
)
from recoup.jobs.model import BackoffPolicy, Job, JobState, PythonTarget, Run, RunOutcome
from recoup.tenancy import ActionSubject, OperatorAction

T0 = datetime(2026, 10, 2, 10, 25, 35, tzinfo=UTC)


def a_run(attempt: int, outcome: RunOutcome, *, error: str | None = None, said: str | None = None,
          at: datetime = T0) -> Run:  # fmt: skip
    return Run(
        job_id="j",
        tenant="acme",
        attempt=attempt,
        started_at=at,
        finished_at=at + timedelta(seconds=1),
        outcome=outcome,
        error=error,
        response_excerpt=said,
    )


def a_job(state: JobState) -> Job:
    return Job(
        id="j", tenant="acme", name="flaky", run_at=T0, target=PythonTarget(handler="flaky"),
        payload=None, idempotency_key=None, retry=BackoffPolicy(), timeout=timedelta(seconds=30),
        keep_for=None, schedule_id=None, state=state, attempts=2, lease_expires_at=None,
        leased_by=None, last_error=None, created_at=T0, updated_at=T0, finished_at=None,
    )  # fmt: skip


def test_a_pending_answer_reads_as_a_sentence_with_when_it_was_asked_again() -> None:
    run = a_run(1, RunOutcome.RETRY, error="AskAgain: the provider's answer is pending")
    text = run_sentence(run, next_try=T0 + timedelta(minutes=1))
    assert "AskAgain" not in text
    assert text == "the provider's answer is pending; tried again at 2026-10-02 10:26:35 UTC."


def test_a_charge_answer_says_what_the_charge_side_did() -> None:
    declined = run_sentence(a_run(1, RunOutcome.SUCCEEDED, said="failed (HTTP 200)"), next_try=None)
    assert declined == "asked the charge endpoint: the charge was declined (HTTP 200)."
    charged = run_sentence(
        a_run(1, RunOutcome.SUCCEEDED, said="succeeded (HTTP 200)"), next_try=None
    )
    assert "the card was charged" in charged


@given(
    name=st.from_regex(r"[A-Z][a-z]+(Error|Again|Exception)?", fullmatch=True),
    message=st.text(min_size=1, max_size=40).filter(lambda s: not s[0].isspace() and s[0] != ":"),
)
def test_no_class_name_is_left_in_front_of_an_error(name: str, message: str) -> None:
    assert plain_error(f"{name}: {message}") == message
    assert name not in plain_error(name)  # a bare name becomes words


def test_an_error_without_a_class_name_is_kept_as_written() -> None:
    assert plain_error("gateway timed out after 30 s") == "gateway timed out after 30 s"


def test_a_redrive_is_marked_between_the_failure_and_the_run_after_it() -> None:
    failed = a_run(1, RunOutcome.FAILED, error="PermanentError: refused")
    again = a_run(2, RunOutcome.SUCCEEDED, at=T0 + timedelta(hours=3))
    lines = run_log(a_job(JobState.SUCCEEDED), [again, failed])
    assert [line.run for line in lines] == [failed, None, again]
    assert "redriven" in lines[1].text and lines[1].at == again.started_at
    assert "PermanentError" not in lines[0].text


def test_a_job_finishes_when_its_last_run_finished_not_when_the_batch_was_written() -> None:
    runs = [
        a_run(1, RunOutcome.RETRY),
        a_run(2, RunOutcome.SUCCEEDED, at=T0 + timedelta(minutes=1)),
    ]
    job = replace(a_job(JobState.SUCCEEDED), finished_at=T0 + timedelta(hours=23))
    assert finished_at(job, runs) == runs[1].finished_at
    assert finished_at(replace(job, state=JobState.SCHEDULED), runs) is None


def an_action(action: str, at: datetime, detail: str = "") -> OperatorAction:
    return OperatorAction(
        tenant="acme", subject=ActionSubject.JOB, subject_id="j", action=action,
        who="ops (rcp_Q2x…)", at=at, detail=detail,
    )  # fmt: skip


def test_a_recorded_retry_names_who_and_stands_for_the_redrive_marker() -> None:
    runs = [
        a_run(1, RunOutcome.FAILED, error="boom"),
        a_run(2, RunOutcome.SUCCEEDED, at=T0 + timedelta(hours=1)),
    ]
    retried = an_action("retry", T0 + timedelta(minutes=30))
    lines = run_log(a_job(JobState.SUCCEEDED), runs, [retried])
    assert [line.run.attempt if line.run else line.text for line in lines] == [
        1,
        "Retried by ops (rcp_Q2x…): scheduled again now, with a fresh budget of attempts.",
        2,
    ]
    # A retry recorded elsewhere in time does not hide the marker of this redrive.
    earlier = an_action("retry", T0 - timedelta(days=1))
    texts = [line.text for line in run_log(a_job(JobState.SUCCEEDED), runs, [earlier])]
    assert texts[0].startswith("Retried by") and "redriven: scheduled again" in texts[2]


@given(minutes=st.lists(st.integers(-600, 600), max_size=6))
def test_actions_land_in_time_order_among_the_runs(minutes: list[int]) -> None:
    runs = [a_run(n, RunOutcome.RETRY, at=T0 + timedelta(hours=n)) for n in (1, 2, 3)]
    done = [an_action("cancel", T0 + timedelta(minutes=m), detail=f"#{i}") for i, m in
            enumerate(minutes)]  # fmt: skip
    lines = run_log(a_job(JobState.SCHEDULED), runs, done)
    assert [line.at for line in lines] == sorted(line.at for line in lines)
    assert [line.run for line in lines if line.run] == runs  # every run, in order
    assert len([line for line in lines if line.run is None]) == len(done)


def test_an_action_says_its_detail_and_who_did_it() -> None:
    stop = an_action("stop", T0, detail="reason: customer left")
    assert action_sentence(stop) == "Dunning stopped by ops (rcp_Q2x…) (reason: customer left)."
    assert action_sentence(an_action("paid", T0)) == "Marked paid by ops (rcp_Q2x…)."
