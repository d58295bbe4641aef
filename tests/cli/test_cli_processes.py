"""`recoup.cli._processes.run_processes`: a copy that exits stops the others, unless each is to
run until it is done (`recoup worker --stop-when-idle --processes N`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from recoup.cli import _processes
from recoup.cli._processes import run_processes


def copies(done: Path, *, second_takes: float) -> Callable[[int], None]:
    """Copy 0 ends at once; copy 1 ends after `second_takes` s, leaving a file named `1`."""

    def run(number: int) -> None:
        if number == 1:
            time.sleep(second_takes)
            (done / "1").touch()

    return run


def test_a_copy_that_ends_stops_the_others(tmp_path: Path) -> None:
    began = time.monotonic()
    assert run_processes(2, copies(tmp_path, second_takes=60), name="t") == 0
    assert not (tmp_path / "1").exists()
    assert time.monotonic() - began < 30


def test_each_until_done_lets_the_others_finish(tmp_path: Path) -> None:
    run = copies(tmp_path, second_takes=0.5)
    assert run_processes(2, run, name="t", each_until_done=True) == 0
    assert (tmp_path / "1").exists()


def test_a_stop_sent_before_a_copy_reset_its_signal_handlers_still_stops_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The copies are forked with this process's handlers; a SIGTERM that reaches one before
    it resets them (a loaded machine: copy 0 ended while copy 1 was still starting) must stop
    it, not run the parent's handler in the copy and be lost."""
    child = _processes._child

    def slow_start(run: Callable[[int], None], number: int) -> None:
        if number == 1:
            time.sleep(0.5)  # the window between the fork and the reset, made wide
        child(run, number)

    monkeypatch.setattr(_processes, "_child", slow_start)
    began = time.monotonic()
    assert run_processes(2, copies(tmp_path, second_takes=5), name="t") == 0
    assert not (tmp_path / "1").exists()
    assert time.monotonic() - began < 4
