"""Every model to the database the running test chose: the tests run once per backend."""

from __future__ import annotations

from typing import Any


class ChosenDatabase:
    alias = "default"  # set by the `database` fixture, read by every thread of the test

    def db_for_read(self, model: Any, **hints: Any) -> str:
        return ChosenDatabase.alias

    def db_for_write(self, model: Any, **hints: Any) -> str:
        return ChosenDatabase.alias

    def allow_relation(self, *objects: Any, **hints: Any) -> bool:
        return True

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool:
        return True
