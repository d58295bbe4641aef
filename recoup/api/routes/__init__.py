"""The HTTP routes, one module-level `APIRouter` per resource, assembled by `create_app`:
`jobs`, `schedules`, `dunning` (/v1/dunning), `clock` (/v1/clock, only on a server on a
virtual clock) and `operations` (/healthz, /readyz, /metrics).

Handlers translate HTTP to operations and nothing more; they reach the app's services through
the dependencies of `recoup.api.deps`. They are plain `def`s: the stores are synchronous, so
FastAPI runs each request in its thread pool and a slow query never blocks the event loop.
"""
