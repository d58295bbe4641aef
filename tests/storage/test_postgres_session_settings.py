"""The settings of every connection of the PostgreSQL store: its schema, UTC, and no JIT. JIT
compiled the flow keys' recursive walk, whose estimated cost crosses `jit_above_cost`, for
about 0.4 s on every claim, to run it in well under a millisecond: a drain of 100,000 no-op
jobs went at a third of its speed."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tests.storage.databases import MigratedSchemas

pytestmark = pytest.mark.postgres


def test_the_pool_and_the_listener_run_in_the_schema_in_utc_without_jit(
    postgres_url: str, postgres_schemas: MigratedSchemas
) -> None:
    import psycopg

    from recoup.storage.postgres.dialect import QUERIES, PostgresDialect

    schema = postgres_schemas.take()
    dialect = PostgresDialect(postgres_url, schema=schema, min_size=1, max_size=1)
    try:
        with dialect.connection() as conn:
            shown = [
                conn.execute(f"SHOW {name}").fetchone()[0]  # type: ignore[index]
                for name in ("search_path", "TimeZone", "jit")
            ]
            assert shown == [schema, "UTC", "off"]
            # The walk that JIT made slow: planned without a JIT section even where the server
            # would compile any statement at all.
            conn.execute("SET LOCAL jit_above_cost = 0")
            plan = conn.execute(
                "EXPLAIN (ANALYZE) " + QUERIES["flow_keys_due"],
                {"until": datetime.now(UTC), "keys": 64},
            ).fetchall()
            assert not any(str(row[0]).startswith("JIT:") for row in plan)
        with psycopg.connect(postgres_url, **dialect.connect_kwargs()) as listener:
            assert listener.execute("SHOW jit").fetchone() == ("off",)
    finally:
        dialect.close()
        postgres_schemas.give_back(schema)
