"""SQL kept in `.sql` files: named query blocks and numbered migrations, per backend.

A query file holds blocks introduced by a line `-- name --` (procrastinate's style); the block
runs until the next such line. `{job_columns}` and `{j_job_columns}` expand to the job columns
in the order `recoup.storage.job_rows.JOB_COLUMNS` decodes (the second prefixed with `j.`), so every
query that returns jobs returns them in one shape; `{insert_columns}` to the columns of a new
job's row, in the order `recoup.storage.job_rows.JobEncoder` encodes them.

`{lost_error}` and `{attempts_ceiling}` expand, in every file, to the rescue rule's error
text (an expression over `leased_by`) and attempt ceiling (`recoup.storage.rules`), so both
dialects rescue lost leases by one rule.

A query file of other tables passes its own column lists (`expansions`, placeholder → text),
under names that end `_columns` too.

A block whose name starts with `_` is a fragment, not a query: `{_name}` in any later block
expands to its text (a clause several statements share, written once per dialect). An unknown
`{_name}` or `{…_columns}` is an error at load time.

Migrations are files named `NNNN_description.sql` in a backend's `migrations` package; every
numbered file present is applied, in order, and its number recorded in `schema_version`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources

from recoup.storage.job_rows import INSERT_COLUMNS, JOB_COLUMNS, SCHEDULE_COLUMNS
from recoup.storage.rules import SQL_EXPANSIONS

_BLOCK = re.compile(r"^-- ([a-z_][a-z0-9_]*) --[ \t]*$", re.MULTILINE)
_MIGRATION = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")
# What is left of a placeholder nobody expanded (a typo, or a fragment defined too late).
_UNEXPANDED = re.compile(r"\{(_[a-z0-9_]*|[a-z_]*_columns)\}")

_EXPANSIONS = {
    "{job_columns}": ", ".join(JOB_COLUMNS),
    "{j_job_columns}": ", ".join(f"j.{c}" for c in JOB_COLUMNS),
    "{insert_columns}": ", ".join(INSERT_COLUMNS),
    "{schedule_columns}": ", ".join(SCHEDULE_COLUMNS),
    **SQL_EXPANSIONS,
}


def parse_queries(text: str, expansions: Mapping[str, str] | None = None) -> dict[str, str]:
    """Split a query file into its named blocks, with the column lists (the jobs' and
    `expansions`) and fragments expanded (fragments, `-- _name --` blocks, are not returned)."""
    parts = _BLOCK.split(text)
    queries: dict[str, str] = {}
    fragments: dict[str, str] = {}
    placeholders = {**_EXPANSIONS, **(expansions or {})}
    # parts = [preamble, name1, body1, name2, body2, ...]
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in queries or name in fragments:
            raise ValueError(f"query {name!r} is defined twice")
        for placeholder, columns in placeholders.items():
            body = body.replace(placeholder, columns)
        for fragment, fragment_text in fragments.items():
            body = body.replace(f"{{{fragment}}}", fragment_text)
        leftover = _UNEXPANDED.search(body)
        if leftover is not None:
            raise ValueError(f"query {name!r}: unknown placeholder {leftover.group(0)}")
        (fragments if name.startswith("_") else queries)[name] = body.strip()
    return queries


def load_queries(
    package: str, filename: str = "queries.sql", expansions: Mapping[str, str] | None = None
) -> dict[str, str]:
    text = resources.files(package).joinpath(filename).read_text("utf-8")
    return parse_queries(text, expansions)


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def load_migrations(package: str) -> list[Migration]:
    """Every `NNNN_*.sql` file of the package, in version order (a duplicate number is an
    error: two engineers picked the same one)."""
    found: dict[int, Migration] = {}
    for entry in resources.files(package).iterdir():
        match = _MIGRATION.match(entry.name)
        if not match:
            continue
        version = int(match.group(1))
        if version in found:
            raise ValueError(
                f"migrations {found[version].name} and {entry.name} share the number {version}"
            )
        found[version] = Migration(version, entry.name, entry.read_text("utf-8"))
    return [found[v] for v in sorted(found)]
