"""`recoup.cli._processes.run_processes`: a copy that exits stops the others, unless each is to
run until it is done (`recoup worker --stop-when-idle --processes N`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

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
