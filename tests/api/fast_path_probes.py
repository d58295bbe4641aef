"""What the fast-path tests watch: the token reads a request makes, and whether a store or
service call ran on the event loop's thread or in the thread pool's."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.api.conftest import Api


def token_reads(api: Api, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The token hashes read from the store from now on, in order."""
    tables = api.app.state.api.services.tables
    reads: list[str] = []
    original = tables.token_owner

    def counted(token_hash: str) -> Any:
        reads.append(token_hash)
        return original(token_hash)

    monkeypatch.setattr(tables, "token_owner", counted)
    return reads


def on_the_loop(owner: object, name: str, monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """For each later call of `owner.name`: True when it ran on the event loop's thread."""
    original = getattr(owner, name)
    seen: list[bool] = []

    def recorded(*args: Any, **kwargs: Any) -> Any:
        try:
            asyncio.get_running_loop()
            seen.append(True)
        except RuntimeError:  # a thread of the pool runs no loop
            seen.append(False)
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, recorded)
    return seen
