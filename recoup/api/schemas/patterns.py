"""The regular expressions the API both states in /openapi.json and enforces: a request whose
strings match them is accepted (as far as its text goes), one that does not is refused.

Each is written once here in the dialect common to JSON Schema (ECMA-262), pydantic's Rust
engine and Python's `re`: no lookaround, no inline flags (case-insensitive parts spell both
cases), anchored with `^…$`. Where the layers below accept more, the API accepts exactly what
it states, so a client generated from the document and the server agree.
"""

from __future__ import annotations

from typing import Final

from recoup.storage.job_rows import CURSOR_PATTERN

NO_NUL: Final = r"^[^\x00]*$"  # PostgreSQL text cannot hold NUL
NO_NUL_OR_AT: Final = r"^[^\x00@]*$"  # '@' separates a schedule's name and an occurrence's instant

# -- List cursors: `{created_at µs}:{id}` of the last item of the previous page --------------

CURSOR: Final = CURSOR_PATTERN

__all__ = ["CURSOR", "NO_NUL", "NO_NUL_OR_AT"]
