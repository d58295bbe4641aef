"""Recurring schedules, in one place: a stored rule (cron in a zone, or a billing anchor) whose
occurrences become ordinary jobs named `{schedule}@{occurrence instant, ISO UTC}`.

- `model`: the records (`NewSchedule`, `Schedule`, the rules `CronRule` and `AnchorRule`, the
  missed policy, the window's check);
- `occurrences`: a rule's occurrences inside its window, and their materialisation as jobs;
- `calls`: the schedules half of the `Scheduler` Python API (create, read, list, change,
  pause, resume, delete, upcoming, materialise).

The pure rules of a change (what a PATCH may change) are `recoup.jobs.changes`'.
"""
