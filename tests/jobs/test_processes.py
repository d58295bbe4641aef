"""Telling whether a registered worker process still runs (`recoup.jobs.processes`): what a
SQLite store on the same machine relies on to hand a killed worker's jobs back at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from recoup.jobs.processes import process_alive, process_key, this_process
from tests.support import wait_until

pytestmark = pytest.mark.skipif(process_key() is None, reason="needs Linux's /proc")


def _state(pid: int) -> str:
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2 :].split()[0]


def test_this_process_is_alive() -> None:
    me = this_process("w1")
    assert (me.id, me.pid) == ("w1", os.getpid())
    assert me.process_key == process_key()
    assert process_alive(me.pid, me.process_key) is True


def test_a_process_that_exited_is_dead() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    key = process_key(child.pid)
    assert process_alive(child.pid, key) is True
    child.kill()
    child.wait()
    assert process_alive(child.pid, key) is False


def test_a_killed_process_not_yet_reaped_is_dead() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    key = process_key(child.pid)
    try:
        os.kill(child.pid, signal.SIGKILL)
        assert wait_until(lambda: _state(child.pid) == "Z")  # a zombie: its PID still answers
        os.kill(child.pid, 0)
        assert process_alive(child.pid, key) is False
    finally:
        child.wait()


def test_a_pid_held_by_a_process_that_started_at_another_time_is_dead() -> None:
    key = process_key()
    assert key is not None
    scope, _, start = key.rpartition(":")
    reused = f"{scope}:{int(start) + 1}"  # what a dead worker that held our PID left behind
    assert process_alive(os.getpid(), reused) is False


def test_a_process_of_another_machine_or_namespace_cannot_be_told() -> None:
    assert process_alive(os.getpid(), "another-boot:pid:[4026531836]:1") is None
    assert process_alive(os.getpid(), None) is None
