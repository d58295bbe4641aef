"""The garbage collector set for a worker process (`settle_collector`), called by `recoup worker`
once it is set up and before it runs, never by the library's `Worker` (an application that
embeds one keeps its own collector settings).

Why: a delivery allocates a few dozen container objects (the claimed job's records, the
request's headers, aiohttp's request and response, the run), and a worker holds up to two
claims' worth of jobs. With CPython's default thresholds (a young collection every 700
allocations net) that made about 80 collections per 1,000 jobs, and the full collections among
them walked every object of start-up (modules, classes, the store): 40 µs of CPU per delivered
job, a seventh of a worker's (`bench/bench_http.py`'s workload; timed with `gc.callbacks`).
Start-up's objects live as long as the process, so they are moved out of the collector's
sight (`gc.freeze`, as CPython's documentation suggests for long-lived processes), and the
young generation is collected every `YOUNG_THRESHOLD` allocations: the same work in far
fewer, slightly longer collections (a fraction of a millisecond each), with 2 µs per job left.
"""

from __future__ import annotations

import gc
from typing import Final

YOUNG_THRESHOLD: Final = 10_000  # net container allocations between young collections
OLDER_THRESHOLDS: Final = (10, 10)  # CPython's defaults for the two older generations


def settle_collector() -> None:
    """Collect once, freeze what survives (start-up's objects: never garbage again) and raise
    the young generation's threshold. For the worker's own process only."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, *OLDER_THRESHOLDS)


__all__ = ["OLDER_THRESHOLDS", "YOUNG_THRESHOLD", "settle_collector"]
