"""PostgreSQL migrations: numbered plain SQL files (`0001_init.sql`, …) applied in order by
`PostgresStore.migrate`; this package only makes them loadable as resources."""
