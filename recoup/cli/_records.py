"""What `recoup jobs …` and `recoup schedules …` share: their common options, the checks of
their text options, and their records as JSON, built from the API's models (`recoup.wire`)
that both a local database and a remote server (`--url`) answer in, so both print alike."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from recoup.errors import InvalidInput
from recoup.jobs.metadata import check_filter
from recoup.jobs.store import MAX_PAGE
from recoup.timekeeping.instants import format_utc

if TYPE_CHECKING:
    from rich.text import Text

    from recoup.wire.schemas import JobOut, RunOut, ScheduleOut, TargetOut
    from recoup.wire.schemas.callbacks import CallbacksOut

MAX_NAME = 200  # characters of a name filter, as the API's

TenantOption = Annotated[str, typer.Option(help="The tenant (`default`: the embedded one).")]
# Bounds checked below (the stores' `InvalidInput`, spelled `--limit`), not by Typer, whose
# message would not echo the value.
LimitOption = Annotated[int, typer.Option(help=f"Records per page (1–{MAX_PAGE}).")]
CursorOption = Annotated[
    str | None, typer.Option(help="`next_cursor` of the previous page.", show_default=False)
]


def checked_text(option: str, value: str | None) -> str | None:
    """`value` of a name-like option, or `InvalidInput` naming `option`: 1–`MAX_NAME`
    characters, no NUL (what the stores can hold)."""
    if value is None:
        return None
    if not 1 <= len(value) <= MAX_NAME or "\x00" in value:
        raise InvalidInput(option, value, f"expected 1–{MAX_NAME} characters, no NUL")
    return value


@contextlib.contextmanager
def spelled_as_typed(spelling: dict[str, str]) -> Iterator[None]:
    """Rename the field an `InvalidInput` from below names (`cursor`) to the option the user
    typed (`--cursor`)."""
    try:
        yield
    except InvalidInput as exc:
        raise InvalidInput(spelling.get(exc.field, exc.field), exc.value, exc.allowed) from None


# `--metadata key=value`, repeatable: every pair must be in a job's (or schedule's) metadata.
MetadataOption = Annotated[
    list[str] | None,
    typer.Option(
        "--metadata",
        help="Only those whose metadata holds KEY=VALUE (repeat: every pair must match).",
        show_default=False,
    ),
]


def metadata_filter(pairs: list[str] | None) -> dict[str, str] | None:
    """`--metadata` options as a filter, or `InvalidInput` naming `--metadata`: each
    `key=value` once per key, the key as stored metadata's (`recoup.jobs.metadata`)."""
    if not pairs:
        return None
    found: dict[str, str] = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals:
            raise InvalidInput("--metadata", pair, "expected KEY=VALUE")
        if key in found:
            raise InvalidInput("--metadata", pair, f"expected each key once ({key!r} twice)")
        found[key] = value
    try:
        return check_filter(found)
    except InvalidInput as exc:
        raise InvalidInput("--metadata", exc.value, exc.allowed) from None


def exactly_one(what: str, **given: str | None) -> None:
    """`InvalidInput` unless exactly one of `given` (option spelling → value) is set."""
    chosen = [option for option, value in given.items() if value is not None]
    if len(chosen) != 1:
        names = " or ".join(given)
        value = " and ".join(chosen) if chosen else "neither"
        raise InvalidInput(names, value, f"expected exactly one of {names} ({what})")


# Controls a terminal would obey (ESC starts a sequence that rewrites the screen): stored
# records from before names refused them, a run's error text, a target's URL.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def shown(value: str | None) -> Text:
    """A record's text for a terminal table: control characters escaped (`\\x1b`), and taken
    as plain text, never as Rich markup (a name `[red]x` prints as itself)."""
    from rich.text import Text

    text = _CONTROL.sub(lambda found: found.group().encode("unicode_escape").decode(), value or "")
    return Text(text)


def shown_row(*values: str | None) -> list[Text]:
    """`shown` of each cell of a table's row."""
    return [shown(value) for value in values]


def instant(value: datetime | None) -> str | None:
    return None if value is None else format_utc(value)


def target_text(target: TargetOut) -> str:
    """A target for people: `POST https://…` or `python:handler` (headers, which may carry
    credentials, are never printed)."""
    if target.kind == "http":
        return f"{(target.method or '').upper()} {target.url}"
    return f"python:{target.handler}"


def _target_json(target: TargetOut, callbacks: CallbacksOut) -> dict[str, Any]:
    if target.kind == "http":
        method = (target.method or "").upper()
        found: dict[str, Any] = {"kind": "http", "method": method, "url": target.url}
        if callbacks.callback is not None:
            found["callback"] = callbacks.callback
        if callbacks.failure_callback is not None:
            found["failure_callback"] = callbacks.failure_callback
        return found
    return {"kind": "python", "handler": target.handler}


def job_json(job: JobOut) -> dict[str, Any]:
    return {
        "id": job.id,
        "name": job.name,
        "state": job.state.value,
        "run_at": instant(job.run_at),
        "target": _target_json(job.target, job),
        "attempts": job.attempts,
        "max_attempts": job.retry.max_attempts,
        "last_error": job.last_error,
        "schedule_id": job.schedule_id,
        "group": job.group,
        "metadata": job.metadata,
        "created_at": instant(job.created_at),
        "updated_at": instant(job.updated_at),
        "finished_at": instant(job.finished_at),
    }


def run_json(run: RunOut) -> dict[str, Any]:
    return {
        "attempt": run.attempt,
        "started_at": instant(run.started_at),
        "finished_at": instant(run.finished_at),
        "duration_ms": run.duration_ms,
        "outcome": run.outcome,
        "status_code": run.status_code,
        "error": run.error,
        "response_excerpt": run.response_excerpt,
    }


def rule_text(schedule: ScheduleOut) -> str:
    anchor = schedule.anchor
    if anchor is None:
        return f"cron {schedule.cron} ({schedule.timezone})"
    every = anchor.every if anchor.interval == 1 else f"{anchor.interval} {anchor.every}"
    return f"every {every} from {anchor.local} ({anchor.timezone})"


def schedule_json(schedule: ScheduleOut) -> dict[str, Any]:
    anchor = schedule.anchor
    return {
        "id": schedule.id,
        "name": schedule.name,
        "cron": schedule.cron,
        "timezone": schedule.timezone,
        "anchor": None if anchor is None else anchor.model_dump(mode="json"),
        "target": _target_json(schedule.target, schedule),
        "missed": schedule.missed,
        "paused": schedule.paused,
        "state": schedule.state.value,
        "next_fire_at": instant(schedule.next_fire_at),
        "metadata": schedule.metadata,
        "start_at": instant(schedule.start_at),
        "end_at": instant(schedule.end_at),
        "created_at": instant(schedule.created_at),
        "updated_at": instant(schedule.updated_at),
    }


__all__ = [
    "MAX_NAME",
    "CursorOption",
    "LimitOption",
    "MetadataOption",
    "TenantOption",
    "checked_text",
    "exactly_one",
    "instant",
    "job_json",
    "metadata_filter",
    "rule_text",
    "run_json",
    "schedule_json",
    "spelled_as_typed",
    "target_text",
]
