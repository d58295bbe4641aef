"""The per-backend `backend` and `store` fixtures, from their home in tests/storage/conftest.py."""

from __future__ import annotations

from tests.storage.conftest import Backend, Store, backend, store

__all__ = ["Backend", "Store", "backend", "store"]
