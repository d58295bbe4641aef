"""The store of `--db`/`--schema`, opened for one existing tenant, as the commands that read a
tenant's dunning data (`recoup report`, `recoup merchants …`) need it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from recoup.cli._app import store_options
from recoup.errors import NotFound
from recoup.jobs.model import DEFAULT_TENANT

if TYPE_CHECKING:
    from recoup.storage import Store


@contextlib.contextmanager
def opened_store(db: str, schema: str | None, tenant: str) -> Iterator[Store]:
    """The store, closed afterwards; `NotFound` naming the tenant unless it exists (`default`,
    the embedded tenant, always does)."""
    from recoup.storage import open_store

    store = open_store(db, **store_options(schema, db))
    try:
        if tenant != DEFAULT_TENANT and store.get_tenant(tenant) is None:
            raise NotFound(f"no tenant {tenant!r}; `recoup tenants list` shows them")
        yield store
    finally:
        store.close()
