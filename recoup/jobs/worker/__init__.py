"""The worker: claims due jobs in batches, fires each at its exact instant, runs them
concurrently, and reports completions in batches.

One asyncio loop per worker; every store call runs in a small thread pool, so the loop never
waits on the database. Where each part lives (ARCHITECTURE.md, 'Time in the worker'):

- `config`: `WorkerConfig`, every tunable in one frozen record (`Worker(store, config, …)`
  takes collaborators only beside it).
- `clocks`: due time (the injected `Clock`, maybe virtual) and elapsed time (`Elapsed`: real
  unless a test steps it), never mixed; `WorkerClock` carries both, and the wall clock.
- `ledger`: what the worker holds in memory, shared by the parts: each held job's state (a
  `HeldState`, changed only by the ledger's transitions), the counts claims are sized by, and
  the statistics.
- `firing`: claim what is due within `horizon` under a lease, hold it in memory, arm one timer
  per distinct `run_at`: a burst due at one instant starts within milliseconds of it instead
  of at the next poll. A saturated worker claims only as many as it frees.
- `running`: up to `concurrency` attempts at once (HTTP targets, Python handlers inline, in a
  thread or on consumer tasks), each bounded by its job's timeout.
- `completions`: the pure completion rule (`completion_for`) and the buffer that writes
  completions with one `complete_many` call per batch.
- `leases`: heartbeats every `lease / 3`, the watchdog that gives held jobs up when no
  heartbeat succeeded for 80 % of a lease, revocation of jobs the store took back.
- `sessions`: the worker's session (ARCHITECTURE.md, 'Worker sessions'): registered while
  `run()` runs, beaten every `session_beat`; when it cannot be proven alive in time, every held
  job is given up and claims wait, so other workers may hand its jobs back within seconds of
  a crash without a job ever running twice at once.
- `maintenance`: hand back dead workers' jobs, rescue expired leases (anyone's), materialise
  schedules, prune, each on its interval; a failing step is logged and tried again at its
  next turn.
- `secret_cache`: tenants' signing secrets for a minute.
- `sleeping`: sleep until the earliest due instant, a deadline, a notification (LISTEN/NOTIFY,
  watched by one thread) or a poke; never longer than `max_sleep`.
- `collector`: the garbage collector set for a worker's own process (`recoup worker` calls
  it; the library's `Worker` never does).
- `parts`: every part above built and wired to the others from one configuration.
- `facade`: `Worker`: `run()` (until `request_stop()`, or with `stop_when_idle` until nothing
  is due, then a graceful stop within `grace`), `run_until_idle()` / `drain()` (everything due
  at the due clock's now, for tests, test clocks and the demo), and `session()`, which lets
  many `run_until_idle()` calls on a virtual clock share one set of resources.
"""

from recoup.jobs.worker.clocks import Elapsed, RealElapsed, Timer, WorkerClock
from recoup.jobs.worker.completions import completion_for
from recoup.jobs.worker.config import (
    DEFAULT_GRACE,
    DEFAULT_HORIZON,
    DEFAULT_LEASE,
    WorkerConfig,
    default_worker_id,
)
from recoup.jobs.worker.facade import Worker
from recoup.jobs.worker.ledger import WorkerStats

__all__ = [
    "DEFAULT_GRACE",
    "DEFAULT_HORIZON",
    "DEFAULT_LEASE",
    "Elapsed",
    "RealElapsed",
    "Timer",
    "Worker",
    "WorkerClock",
    "WorkerConfig",
    "WorkerStats",
    "completion_for",
    "default_worker_id",
]
