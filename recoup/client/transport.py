"""What the Python client's groups of calls (`client.dunning`, `client.changes`) rely on from
`recoup.client.Client`, which sends every request: declared once, implemented there."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)


class Transport:
    """The requests a group of calls sends through the client (retries, problems mapped to
    exceptions, one Idempotency-Key for every try of a POST)."""

    def _get(self, model: type[M], path: str, params: Mapping[str, Any] | None = None) -> M:
        raise NotImplementedError

    def _post(self, model: type[M], path: str, payload: Any, idempotency_key: str | None) -> M:
        raise NotImplementedError

    def _put_json(self, model: type[M], path: str, payload: Any) -> M:
        raise NotImplementedError

    def _send(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        raise NotImplementedError


__all__ = ["M", "Transport"]
