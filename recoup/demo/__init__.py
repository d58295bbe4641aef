"""`recoup demo`: a month of failed renewals recovered through the real path in seconds, on a
test clock, with the report, the double charges (zero) and the old nightly batch beside it.

The demo is an edge, like the CLI: it chooses a backend (a fresh SQLite file), starts the
example billing app (`examples/billing_app`, in a process of its own: `billing_side`) and
drives the dunning runtime. `run` is the whole run; `population` draws the customers,
`driver` plays their side, `nightly` the old way, `audit` counts double charges.

The names load on first use: the billing app's process imports this package too, and needs
none of the run's.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from recoup.demo.run import AfterRun, DemoOptions, DemoResult, Progress, run_demo

_NAMES = ("AfterRun", "DemoOptions", "DemoResult", "Progress", "run_demo")


def __getattr__(name: str) -> Any:
    if name not in _NAMES:
        raise AttributeError(f"module 'recoup.demo' has no attribute {name!r}")
    return getattr(importlib.import_module("recoup.demo.run"), name)


__all__ = ["AfterRun", "DemoOptions", "DemoResult", "Progress", "run_demo"]
