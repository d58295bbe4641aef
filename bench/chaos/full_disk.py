"""A full disk under the embedded default (SQLite): the run mounts a small filesystem of its own
(tmpfs, `SIZE_BYTES`; mounting needs root, so without it the run says why and does nothing),
opens a store on it, and enqueues jobs one at a time while a filler file takes the space left.
Writes must then fail with a clear error (`StorageError`, never a crash or a corrupt database),
nothing acknowledged may be lost or doubled, and once the filler is deleted the same store,
never reopened, must take writes again by itself.

Figures: writes tried, acknowledged, refused (and the error they gave), lost (acknowledged, not
found afterwards), doubled (two jobs of one name), the seconds from the space coming back to the
first write acknowledged, and `PRAGMA integrity_check`.

    python -m bench.chaos.full_disk [--writes 400]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from pathlib import Path

from recoup.errors import StorageError
from recoup.jobs.model import HttpTarget, JobState
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.ssrf import SsrfGuard
from recoup.jobs.store import JobFilter
from recoup.storage.sqlite.store import SqliteStore
from recoup.timekeeping.clock import SystemClock

# The filesystem: room for the schema, jobs and a WAL up to its automatic checkpoint (1000 pages,
# 4 MiB): on a smaller one the WAL alone fills the disk again right after space returns.
SIZE_BYTES = 16 * 1024 * 1024
TARGET = HttpTarget(url="http://127.0.0.1:9/never-called")


class CannotMount(Exception):
    """The run cannot make its filesystem here (not root, or no tmpfs)."""


@dataclass
class FullDiskFigures:
    writes: int = 0
    acknowledged: int = 0
    refused: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    lost: int = 0
    doubled: int = 0
    recovery_seconds: float | None = None
    integrity: str = ""
    refused_while_full: bool = False  # at least one write refused while the disk was full

    @property
    def passed(self) -> bool:
        return (
            self.lost == 0
            and self.doubled == 0
            and self.refused_while_full
            and self.recovery_seconds is not None
            and self.integrity == "ok"
        )


@contextlib.contextmanager
def small_filesystem(size: int = SIZE_BYTES) -> Iterator[Path]:
    """A tmpfs of `size` bytes mounted for the run, unmounted after; `CannotMount` if not."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        raise CannotMount("mounting a tmpfs needs root (and mount(8))")
    where = Path(tempfile.mkdtemp(prefix="recoup-full-disk-"))
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        where.rmdir()
        raise CannotMount(f"mount -t tmpfs refused: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)
        with contextlib.suppress(OSError):
            where.rmdir()


def fill(path: Path) -> None:
    """Take every byte left on `path`'s filesystem."""
    # Unbuffered, and the suppression outside the file: its close must not flush into ENOSPC.
    with contextlib.suppress(OSError), path.open("wb", buffering=0) as filler:
        while True:
            filler.write(b"\0" * 65536)


def run_full_disk(*, writes: int = 400, root: Path | None = None) -> FullDiskFigures:
    figures = FullDiskFigures()
    with contextlib.ExitStack() as stack:
        where = root if root is not None else stack.enter_context(small_filesystem())
        store = SqliteStore(str(where / "recoup.db"))
        stack.callback(store.close)
        scheduler = Scheduler(store, clock=SystemClock(), ssrf=SsrfGuard(allow_private=True))
        acknowledged: list[str] = []
        filler = where / "filler"
        freed_at: float | None = None
        for n in range(writes):
            if n == writes // 3:
                fill(filler)
            full = filler.exists()
            if n == 2 * writes // 3 and full:
                filler.unlink()
                freed_at, full = time.monotonic(), False
            figures.writes += 1
            try:
                scheduler.enqueue(TARGET, delay=timedelta(days=1), name=f"write-{n}")
            except StorageError as exc:
                figures.refused += 1
                figures.refused_while_full |= full
                kind = str(exc)[:120]
                figures.errors[kind] = figures.errors.get(kind, 0) + 1
                continue
            acknowledged.append(f"write-{n}")
            figures.acknowledged += 1
            if freed_at is not None and figures.recovery_seconds is None:
                figures.recovery_seconds = round(time.monotonic() - freed_at, 4)
        names: dict[str, int] = {}
        cursor = None
        while True:
            page = store.list_jobs(JobFilter(tenant="default", limit=500, cursor=cursor))
            for job in page.jobs:
                if job.state is JobState.SCHEDULED and job.name is not None:
                    names[job.name] = names.get(job.name, 0) + 1
            cursor = page.next_cursor
            if cursor is None:
                break
        figures.lost = sum(1 for name in acknowledged if name not in names)
        figures.doubled = sum(1 for count in names.values() if count > 1)
        import sqlite3

        with contextlib.closing(sqlite3.connect(where / "recoup.db")) as conn:
            figures.integrity = str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writes", type=int, default=400)
    args = parser.parse_args()
    try:
        figures = run_full_disk(writes=args.writes)
    except CannotMount as exc:
        print(f"full disk: not run ({exc})")
        return 0
    print(json.dumps({**asdict(figures), "passed": figures.passed}, indent=2))
    return 0 if figures.passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
