"""A full disk under SQLite (bench/chaos/full_disk.py), bounded: writes fail with a clear
`StorageError` while the run's small filesystem is full, nothing acknowledged is lost or
doubled, the database stays intact, and the same store takes writes again once space returns.
Skipped where the run cannot mount its filesystem (not root), saying so."""

from __future__ import annotations

import pytest

from bench.chaos.full_disk import CannotMount, run_full_disk


def test_a_full_disk_refuses_writes_clearly_loses_nothing_and_recovers_by_itself() -> None:
    try:
        figures = run_full_disk(writes=240)
    except CannotMount as exc:
        pytest.skip(str(exc))
    assert figures.refused_while_full and figures.refused > 0, figures
    assert all("disk is full" in error for error in figures.errors), figures.errors
    assert figures.lost == 0 and figures.doubled == 0, figures
    assert figures.recovery_seconds is not None and figures.recovery_seconds < 1.0, figures
    assert figures.acknowledged + figures.refused == figures.writes
    assert figures.integrity == "ok"
