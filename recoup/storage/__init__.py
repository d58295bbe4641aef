"""Storage backends: `open_store(url)` picks SQLite or PostgreSQL from a URL.

Accepted URLs:
- `sqlite:///relative/path.db` (relative to the working directory), `sqlite:////abs/path.db`,
  `sqlite://:memory:` (or `sqlite:///:memory:`), or a bare path ending `.db`, `.sqlite` or
  `.sqlite3`;
- `postgresql://…` or `postgres://…` (libpq URL; options such as `schema` go in `opts`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from recoup.errors import InvalidInput

if TYPE_CHECKING:
    from recoup.storage.postgres.store import PostgresStore
    from recoup.storage.sqlite.store import SqliteStore

__all__ = ["DEFAULT_DB_URL", "open_store", "sqlite_path"]

DEFAULT_DB_URL = "sqlite:///recoup.db"  # a file in the working directory

_SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
_ALLOWED = (
    "expected sqlite:///path.db, sqlite://:memory:, a path ending .db/.sqlite,"
    " or postgresql://user@host:port/database"
)


def sqlite_path(url: str) -> str | None:
    """The file path (or `:memory:`) a SQLite URL names; None if `url` is not SQLite."""
    if url.startswith("sqlite://"):
        rest = url.removeprefix("sqlite://")
        if rest in (":memory:", "/:memory:"):
            return ":memory:"
        if not rest.startswith("/") or rest == "/":
            return None  # sqlite://host/… has no meaning here
        return rest[1:]  # sqlite:///rel → rel, sqlite:////abs → /abs
    if "://" not in url and url.lower().endswith(_SQLITE_SUFFIXES):
        return url
    return None


def open_store(url: str, **opts: Any) -> SqliteStore | PostgresStore:
    """Open (and, unless `migrate=False`, migrate) the store that `url` names.

    `opts` go to the backend's constructor (`SqliteStore` or `PostgresStore`)."""
    path = sqlite_path(url)
    if path is not None:
        from recoup.storage.sqlite.store import SqliteStore

        return SqliteStore(path, **opts)
    if url.startswith(("postgresql://", "postgres://")):
        from recoup.storage.postgres.store import PostgresStore

        return PostgresStore(url, **opts)
    raise InvalidInput("--db", url, _ALLOWED)
