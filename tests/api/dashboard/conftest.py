"""The dashboard's fixtures: a `Desk` (tests/api/dashboard/desk.py) over each backend's store."""

from __future__ import annotations

import pytest

from recoup.storage import Store
from tests.api.dashboard.desk import Desk, make_desk


@pytest.fixture
def desk(store: Store) -> Desk:
    return make_desk(store)
