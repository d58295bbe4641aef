"""Hosted charging's tables (`recoup.recovery.hosted_store.HostedChargeStore`) on both
backends: a tenant's hosted-charging settings and the ledger of its charges (migration
0010_hosted_charging.sql; queries in each backend's `hosted_queries.sql`).

Written once over the backend's dialect; a store exposes it whole as `store.hosted` (the
narrower seam: its callers take a `HostedChargeStore`, not the store).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from recoup.recovery.hosted_store import HostedCharge, HostedChargeState, HostedCharging
from recoup.storage.dialect import Dialect


class SqlHostedTables:
    """`HostedChargeStore` over a dialect's connections, instant codec and queries."""

    def __init__(self, dialect: Dialect) -> None:
        self._read = dialect.read
        self._write = dialect.write
        self._encode = dialect.encode_instant
        self._decode = dialect.decode_instant
        self._q = dialect.queries

    # Settings

    def _charging(self, row: Sequence[Any]) -> HostedCharging:
        return HostedCharging(
            tenant=row[0], provider=row[1], api_key=row[2], updated_at=self._decode(row[3])
        )

    def get_hosted_charging(self, tenant: str) -> HostedCharging | None:
        with self._read() as conn:
            row = conn.execute(self._q["get_hosted_charging"], {"tenant": tenant}).fetchone()
        return None if row is None else self._charging(row)

    def put_hosted_charging(self, charging: HostedCharging) -> HostedCharging:
        params = {
            "tenant": charging.tenant,
            "provider": charging.provider,
            "api_key": charging.api_key,
            "updated_at": self._encode(charging.updated_at),
        }
        with self._write() as conn:
            row = conn.execute(self._q["put_hosted_charging"], params).fetchone()
        assert row is not None  # an upsert … RETURNING returns its row
        return self._charging(row)

    def delete_hosted_charging(self, tenant: str) -> bool:
        with self._write() as conn:
            deleted: int = conn.execute(
                self._q["remove_hosted_charging"], {"tenant": tenant}
            ).rowcount
        return deleted > 0

    def list_hosted_charging(self) -> list[HostedCharging]:
        with self._read() as conn:
            rows = conn.execute(self._q["list_hosted_charging"]).fetchall()
        return [self._charging(row) for row in rows]

    # The ledger

    def _charge(self, row: Sequence[Any]) -> HostedCharge:
        return HostedCharge(
            tenant=row[0],
            charge_key=row[1],
            invoice_id=row[2],
            attempt=row[3],
            state=HostedChargeState(row[4]),
            provider_charge_id=row[5],
            decline_code=row[6],
            advice_code=row[7],
            request_id=row[8],
            calls=row[9],
            created_at=self._decode(row[10]),
            updated_at=self._decode(row[11]),
        )

    def _params(self, charge: HostedCharge) -> dict[str, Any]:
        return {
            "tenant": charge.tenant,
            "charge_key": charge.charge_key,
            "invoice_id": charge.invoice_id,
            "attempt": charge.attempt,
            "state": charge.state.value,
            "provider_charge_id": charge.provider_charge_id,
            "decline_code": charge.decline_code,
            "advice_code": charge.advice_code,
            "request_id": charge.request_id,
            "calls": charge.calls,
            "created_at": self._encode(charge.created_at),
            "updated_at": self._encode(charge.updated_at),
        }

    def get_hosted_charge(self, tenant: str, charge_key: str) -> HostedCharge | None:
        params = {"tenant": tenant, "charge_key": charge_key}
        with self._read() as conn:
            row = conn.execute(self._q["get_hosted_charge"], params).fetchone()
        return None if row is None else self._charge(row)

    def begin_hosted_charge(self, charge: HostedCharge) -> HostedCharge:
        key = {"tenant": charge.tenant, "charge_key": charge.charge_key}
        with self._write() as conn:
            conn.execute(self._q["begin_hosted_charge"], self._params(charge))
            row = conn.execute(self._q["get_hosted_charge"], key).fetchone()
        assert row is not None  # inserted, or there already
        return self._charge(row)

    def record_hosted_charge(self, charge: HostedCharge) -> HostedCharge:
        with self._write() as conn:
            row = conn.execute(self._q["record_hosted_charge"], self._params(charge)).fetchone()
        if row is None:
            raise LookupError(f"no hosted charge {charge.charge_key!r}: begin it first")
        return self._charge(row)

    def hosted_charges(self, tenant: str, invoice_id: str) -> list[HostedCharge]:
        params = {"tenant": tenant, "invoice_id": invoice_id}
        with self._read() as conn:
            rows = conn.execute(self._q["hosted_charges"], params).fetchall()
        return [self._charge(row) for row in rows]


__all__ = ["SqlHostedTables"]
