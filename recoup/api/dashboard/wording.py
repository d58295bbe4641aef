"""What the dashboard says of a job's runs and an invoice's attempts, in sentences a person
reads: an outcome says what happened and what comes next ("the charge endpoint's answer was
pending; asked again at 10:26:44 UTC"), never an internal class name (`AskAgain: …`); a job's
finish is its last run's; a redrive is marked where it happened; an invoice counts the
attempts that ran, not the ones planned. Pure: the records in, text out."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from recoup.dunning.invoice import AttemptState, Invoice
from recoup.jobs.model import Job, JobState, Run, RunOutcome
from recoup.tenancy import OperatorAction

# "AskAgain: …", "PermanentError: …", "TimeoutError", "ClientConnectorError: …": the name of
# the exception class that `jobs.targets.describe` puts first.
_CLASS_NAME = re.compile(r"^(?:[a-z_][\w]*\.)*[A-Z][A-Za-z0-9]*(?::\s*|$)")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
# What the attempt handler returns for a charge endpoint's answer: "failed (HTTP 200)".
_CHARGE_ANSWER = re.compile(r"^(succeeded|failed|already_handled|closed|pending|errored)\b(.*)$")
_ANSWER_WORDS = {
    "succeeded": "the card was charged",
    "failed": "the charge was declined",
    "already_handled": "the charge side had already handled it",
    "closed": "the charge side had closed the invoice",
    "pending": "the answer was pending",
    "errored": "the charge endpoint refused the request",
}
# What an operator's action did, as the run log and the invoice timeline say it.
_ACTION_WORDS = {
    "retry": "retried by {who}: scheduled again now, with a fresh budget of attempts",
    "cancel": "cancelled by {who}",
    "stop": "dunning stopped by {who}",
    "paid": "marked paid by {who}",
}
ATTEMPT_RAN = frozenset(
    {
        AttemptState.SUCCEEDED,
        AttemptState.FAILED,
        AttemptState.ERRORED,
        AttemptState.PENDING,
        AttemptState.AWAITING_REPORT,
    }
)


def plain_error(text: str | None) -> str:
    """An error as stored, without the exception class's name in front (a bare class name
    becomes its words: `TimeoutError` → "timeout error")."""
    if not text:
        return ""
    match = _CLASS_NAME.match(text)
    if match is None:
        return text
    rest = text[match.end() :]
    if rest:
        return rest
    name = match.group(0).rsplit(".", 1)[-1]
    return _CAMEL.sub(" ", name).lower()


def _at(instant: datetime) -> str:
    return instant.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _sentence(text: str) -> str:
    """Ended as a sentence; the first letter stays as written (an error is quoted verbatim)."""
    text = text.strip()
    if not text:
        return text
    return text if text.endswith((".", "!", "?", "…")) else text + "."


def _finished_words(run: Run) -> str:
    said = (run.response_excerpt or "").strip()
    answer = _CHARGE_ANSWER.match(said)
    if answer is not None:
        return f"asked the charge endpoint: {_ANSWER_WORDS[answer.group(1)]}{answer.group(2)}"
    if run.status_code is not None:
        return f"delivered: the target answered HTTP {run.status_code}"
    return f"done: {said}" if said else "done"


def run_sentence(run: Run, *, next_try: datetime | None) -> str:
    """One run's outcome as a sentence; `next_try` is when the job was tried again (the next
    run's start) or is to be (its `run_at`), if it was."""
    error = plain_error(run.error)
    match run.outcome:
        case RunOutcome.SUCCEEDED:
            text = _finished_words(run)
        case RunOutcome.RETRY:
            then = f"tried again at {_at(next_try)}" if next_try else "to be tried again"
            text = f"{error or 'not finished'}; {then}"
        case RunOutcome.FAILED:
            text = f"failed for good: {error}" if error else "failed for good"
        case RunOutcome.LOST:
            then = f"; run again at {_at(next_try)}" if next_try else ""
            text = f"the worker running it stopped before it ended{then}"
        case RunOutcome.CANCELLED:
            text = "cancelled while it ran"
    return _sentence(text)


@dataclass(frozen=True)
class LogLine:
    """A line of a run log: a run with its sentence, or a marker (`run` None) such as a
    redrive, where the log says what an operator did."""

    at: datetime
    text: str
    run: Run | None = None


def action_sentence(action: OperatorAction) -> str:
    """An operator's action as a sentence naming who did it, with its detail (a stop's
    reason, the bulk action it was part of)."""
    words = _ACTION_WORDS.get(action.action, action.action + " by {who}").format(who=action.who)
    said = _sentence(f"{words} ({action.detail})" if action.detail else words)
    return said[:1].upper() + said[1:]


def run_log(job: Job, runs: Sequence[Run], actions: Sequence[OperatorAction] = ()) -> list[LogLine]:
    """A job's runs in order, each with its sentence, and a marker wherever an operator acted
    on it (`actions`, with who did it) and wherever the job ran again after it had failed for
    good with no action recorded there (a redrive through the API or the CLI:
    `JobStore.redrive` keeps the runs before it)."""
    ordered = sorted(runs, key=lambda r: (r.attempt, r.started_at))
    acted = sorted(actions, key=lambda a: a.at)
    lines: list[LogLine] = []
    for index, run in enumerate(ordered):
        later = ordered[index + 1] if index + 1 < len(ordered) else None
        if later is not None:
            next_try: datetime | None = later.started_at
        else:
            next_try = job.run_at if job.state is JobState.SCHEDULED else None
        lines.append(LogLine(run.started_at, run_sentence(run, next_try=next_try), run))
        if run.outcome is RunOutcome.FAILED and (later is not None or job.state.is_live):
            until = later.started_at if later else None
            retried = any(
                a.action == "retry" and a.at >= run.finished_at and (until is None or a.at <= until)
                for a in acted
            )
            if not retried:
                lines.append(
                    LogLine(
                        later.started_at if later else job.run_at,
                        "redriven: scheduled again after it had failed for good.",
                    )
                )
    for action in acted:
        lines.append(LogLine(action.at, action_sentence(action)))
    # Runs first among equals: an action at a run's instant came after it (a retry of the
    # failure that run ended in), and the sort is stable.
    return sorted(lines, key=lambda line: line.at)


def finished_at(job: Job, runs: Sequence[Run]) -> datetime | None:
    """When a job ended: its last run's end, the moment it happened (the job's own
    `finished_at` is when the worker's batch was written, later on a test clock); a job that
    ended without running (cancelled) keeps its own."""
    if job.state.is_live:
        return None
    if runs:
        return max(r.finished_at for r in runs)
    return job.finished_at


def started_at(runs: Sequence[Run]) -> datetime | None:
    return min((r.started_at for r in runs), default=None)


def shown_error(job: Job) -> str:
    """The last error worth showing in a list: none for a job that succeeded in the end (a
    pending answer asked again is not an error of a job that went through)."""
    if job.state is JobState.SUCCEEDED:
        return ""
    return plain_error(job.last_error)


def attempts_made(invoice: Invoice) -> int:
    """Attempts that asked the charge side (planned ones cancelled or still to come do not
    count)."""
    return sum(1 for a in invoice.attempts if a.state in ATTEMPT_RAN)


def attempt_runs(invoice: Invoice, runs: Mapping[int, Sequence[Run]]) -> dict[int, list[str]]:
    """Each attempt's runs as sentences, by attempt number."""
    told: dict[int, list[str]] = {}
    for attempt in invoice.attempts:
        own = sorted(runs.get(attempt.attempt, ()), key=lambda r: (r.attempt, r.started_at))
        told[attempt.attempt] = [
            f"{_at(run.started_at)}: "
            + run_sentence(run, next_try=own[i + 1].started_at if i + 1 < len(own) else None)
            for i, run in enumerate(own)
        ]
    return told


def not_run_words(state: AttemptState) -> str:
    if state is AttemptState.CANCELLED:
        return "not run: cancelled before its time"
    if state is AttemptState.SCHEDULED:
        return "not run yet"
    return "no run recorded"


__all__ = [
    "LogLine",
    "action_sentence",
    "attempt_runs",
    "attempts_made",
    "finished_at",
    "not_run_words",
    "plain_error",
    "run_log",
    "run_sentence",
    "shown_error",
    "started_at",
]
