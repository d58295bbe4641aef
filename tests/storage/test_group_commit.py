"""SQLite's group commit (`recoup.storage.sqlite.group_commit`) on its own, with a recording
stand-in for the transaction: who runs a unit, which units share a group, whose outcome goes
where. Threads are held at events, never slept."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from recoup.storage.sqlite.group_commit import GroupCommit, Unit
from tests.support import wait_until


class Recorder:
    """`run_group` that records each group (and the thread running it) and can hold the
    first group until released, so that units submitted meanwhile queue up."""

    def __init__(self, *, hold_first: bool = False) -> None:
        self.groups: list[tuple[int, list[Unit[Any]]]] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        if not hold_first:
            self.release.set()

    def __call__(self, units: Sequence[Unit[Any]]) -> None:
        self.groups.append((threading.get_ident(), list(units)))
        self.entered.set()
        self.release.wait(10)
        for unit in units:
            try:
                unit.value = unit.fn()
            except BaseException as exc:
                unit.error = exc


def submit_in_thread(
    group: GroupCommit, fn: Callable[[], Any], results: dict[str, Any], name: str
) -> threading.Thread:
    def run() -> None:
        try:
            results[name] = group.run(fn)
        except Exception as exc:
            results[name] = exc

    thread = threading.Thread(target=run, name=name)
    thread.start()
    return thread


def test_a_unit_submitted_alone_runs_at_once_on_the_callers_thread() -> None:
    recorder = Recorder()
    group = GroupCommit(recorder)
    assert group.run(threading.get_ident) == threading.get_ident()
    assert [len(units) for _, units in recorder.groups] == [1]


def test_units_submitted_during_a_commit_share_the_next_group_on_one_thread() -> None:
    recorder = Recorder(hold_first=True)
    group = GroupCommit(recorder)
    results: dict[str, Any] = {}
    first = submit_in_thread(group, lambda: "first", results, "first")
    assert recorder.entered.wait(10)  # the first group is "committing"
    others = [
        submit_in_thread(group, lambda i=i: ("other", i, threading.get_ident()), results, f"o{i}")
        for i in range(5)
    ]
    assert wait_until(lambda: group.waiting == 5)
    recorder.release.set()
    for thread in [first, *others]:
        thread.join(10)
    assert [len(units) for _, units in recorder.groups] == [1, 5]
    leader_thread = recorder.groups[1][0]
    for i in range(5):
        kind, number, ran_on = results[f"o{i}"]
        assert (kind, number) == ("other", i)
        assert ran_on == leader_thread  # every unit of the group ran on its leader's thread
    assert results["first"] == "first"


def test_a_failing_unit_raises_in_its_submitter_alone() -> None:
    recorder = Recorder(hold_first=True)
    group = GroupCommit(recorder)
    results: dict[str, Any] = {}

    def boom() -> None:
        raise LookupError("unit 2 failed")

    first = submit_in_thread(group, lambda: 0, results, "first")
    assert recorder.entered.wait(10)
    threads = [
        submit_in_thread(group, boom if i == 2 else (lambda i=i: i), results, f"u{i}")
        for i in range(4)
    ]
    assert wait_until(lambda: group.waiting == 4)
    recorder.release.set()
    for thread in [first, *threads]:
        thread.join(10)
    assert isinstance(results["u2"], LookupError)
    assert [results[f"u{i}"] for i in (0, 1, 3)] == [0, 1, 3]


def test_groups_are_bounded_and_every_queued_unit_runs() -> None:
    recorder = Recorder(hold_first=True)
    group = GroupCommit(recorder, max_group=2)
    results: dict[str, Any] = {}
    first = submit_in_thread(group, lambda: -1, results, "first")
    assert recorder.entered.wait(10)
    threads = [submit_in_thread(group, lambda i=i: i, results, f"u{i}") for i in range(5)]
    assert wait_until(lambda: group.waiting == 5)
    recorder.release.set()
    for thread in [first, *threads]:
        thread.join(10)
    assert sorted(len(units) for _, units in recorder.groups) == [1, 1, 2, 2]
    assert [results[f"u{i}"] for i in range(5)] == list(range(5))
    # Idle again: the next unit leads a group of its own at once.
    assert group.run(lambda: "again") == "again"


@pytest.mark.parametrize("error", [KeyError("k"), SystemExit(3)])
def test_a_group_that_failed_hands_each_unit_the_error_and_frees_the_lead(
    error: BaseException,
) -> None:
    failed: list[int] = []

    def fails_once(units: Sequence[Unit[Any]]) -> None:
        for unit in units:
            if failed:
                unit.value = unit.fn()
            else:
                unit.error = error
        failed.append(len(units))

    group = GroupCommit(fails_once)
    with pytest.raises(type(error)):
        group.run(lambda: None)
    # The lead was handed back: a later unit is not stuck waiting for a leader.
    assert group.run(lambda: 7) == 7
