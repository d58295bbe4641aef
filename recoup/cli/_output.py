"""Where the commands print their tables: a console whose width never cuts an id. Piped or
captured (not a terminal) the lines are as long as their contents, so every id can be copied
whole; on a terminal the tables fit its width unless `recoup --wide` (or RECOUP_WIDE=1) asks
for lines as long as their contents there too."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

UNBOUNDED = 100_000  # columns: wider than any row a command prints
_wide = False


def set_wide(wide: bool) -> None:
    """`recoup --wide`: set once by the root callback, before any command prints."""
    global _wide
    _wide = wide


def console() -> Console:
    from rich.console import Console

    if _wide or not sys.stdout.isatty():
        return Console(width=UNBOUNDED)
    return Console()


__all__ = ["UNBOUNDED", "console", "set_wide"]
