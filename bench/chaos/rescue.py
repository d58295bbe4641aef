"""Kill → rescue: how long after each SIGKILL the killed worker's session was found dead and
its jobs handed back (ARCHITECTURE.md, 'Worker sessions').

A watcher polls the `workers` table; a dead worker's row is deleted in the same step that
hands its jobs back, so the row's disappearance is the rescue. The run log gives the second
view: each `lost` run names the worker that held it and is stamped when it was handed back.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.chaos.faults import Kill
from recoup.jobs.model import Run

POLL = 0.05  # seconds between looks at the workers table


@dataclass
class WorkersWatch:
    """Polls `list_workers` (the store's `workers()`) in a thread: the ids ever seen, and
    when each one was last seen (monotonic seconds)."""

    list_workers: Callable[[], Sequence[Any]]
    seen_first: dict[str, float] = field(default_factory=dict)
    seen_last: dict[str, float] = field(default_factory=dict)
    gone_at: dict[str, float] = field(default_factory=dict)  # first look without it, once seen
    errors: int = 0
    last_error: str = ""
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="workers-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(POLL):
            try:
                ids = {w.id for w in self.list_workers()}
            except Exception as exc:  # a terminated connection: the store reconnects next time
                self.errors += 1
                self.last_error = repr(exc)
                continue
            now = time.monotonic()
            for worker_id in ids:
                self.seen_first.setdefault(worker_id, now)
                self.seen_last[worker_id] = now
                self.gone_at.pop(worker_id, None)
            for worker_id in self.seen_last.keys() - ids:
                self.gone_at.setdefault(worker_id, now)

    def registered(self, worker_id: str) -> bool:
        return worker_id in self.seen_first

    def wait_registered(self, worker_ids: Sequence[str], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not all(self.registered(w) for w in worker_ids):
            if time.monotonic() > deadline:
                raise RuntimeError(f"workers {list(worker_ids)} did not register in {timeout:g} s")
            time.sleep(POLL)

    def wait_rescued(self, worker_ids: Sequence[str], timeout: float) -> bool:
        """Wait until every one of `worker_ids` that registered is gone from the table (or
        `timeout` passes: the check of the run then names those left)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(self.rescued(w) for w in worker_ids if self.registered(w)):
                return True
            time.sleep(POLL)
        return False

    def rescued(self, worker_id: str) -> bool:
        return worker_id in self.gone_at


@dataclass(frozen=True, kw_only=True)
class RescueFigures:
    kills: int
    registered: int  # killed after its session was registered (the others had no jobs)
    rescued: int  # of those, whose session the others found dead and removed
    seconds: list[float]  # kill → row removed, per rescued kill
    lost_runs: int  # runs handed back from killed workers
    lost_run_seconds: list[float]  # kill → the last of its lost runs, per kill that held jobs
    watch_errors: int  # looks at the workers table that failed (connections terminated)

    def as_json(self) -> dict[str, Any]:
        return {
            "kills": self.kills,
            "registered_when_killed": self.registered,
            "rescued": self.rescued,
            "kill_to_rescue_s": _summary(self.seconds),
            "lost_runs": self.lost_runs,
            "kill_to_last_lost_run_s": _summary(self.lost_run_seconds),
            "watch_errors": self.watch_errors,
        }


def _summary(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"median": None, "max": None, "min": None}
    return {
        "median": round(statistics.median(values), 3),
        "max": round(max(values), 3),
        "min": round(min(values), 3),
    }


def rescue_figures(
    kills: Sequence[Kill], watch: WorkersWatch, lost: Sequence[Run]
) -> RescueFigures:
    """The figures of `kills`, from the watch and the `lost` runs of the run log."""
    registered = [k for k in kills if k.worker_id in watch.seen_first]
    rescued = [k for k in registered if watch.rescued(k.worker_id)]
    by_worker: dict[str, list[Run]] = {}
    for run in lost:
        by_worker.setdefault(run.worker_id or "", []).append(run)
    lost_seconds = [
        (max(r.finished_at for r in by_worker[k.worker_id]) - k.at).total_seconds()
        for k in kills
        if k.worker_id in by_worker
    ]
    return RescueFigures(
        kills=len(kills),
        registered=len(registered),
        rescued=len(rescued),
        seconds=[watch.gone_at[k.worker_id] - k.monotonic for k in rescued],
        lost_runs=sum(len(by_worker.get(k.worker_id, [])) for k in kills),
        lost_run_seconds=lost_seconds,
        watch_errors=watch.errors,
    )


__all__ = ["RescueFigures", "WorkersWatch", "rescue_figures"]
