"""The files a demo run writes beside its database: named here once, so that the command can
refuse a `--db` whose billing files are left from an earlier run (they would be read as this
run's ledger and skew its figures)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class DemoFiles:
    db: Path
    billing_db: Path
    billing_log: Path

    @classmethod
    def beside(cls, db: Path) -> DemoFiles:
        return cls(
            db=db,
            billing_db=db.with_name(db.stem + "-billing.db"),
            billing_log=db.with_name(db.stem + "-billing-app.log"),
        )

    def existing(self) -> list[Path]:
        """Those of the run's files, with SQLite's companions, that already exist."""
        paths = [self.db, self.billing_db, self.billing_log]
        companions = [
            p.with_name(p.name + s) for p in (self.db, self.billing_db) for s in ("-wal", "-shm")
        ]
        return [p for p in [*paths, *companions] if p.exists()]
