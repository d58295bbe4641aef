"""The contract suites' `backend` and `store` fixtures (tests/jobs/conftest.py), for the
storage tests that run once per backend (the dunning store's suite)."""

from __future__ import annotations

from tests.jobs.conftest import backend, store

__all__ = ["backend", "store"]
