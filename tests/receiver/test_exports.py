"""The public surface of `recoup.receiver` is the intended one, sorted, and importable without
the FastAPI integration."""

from __future__ import annotations

import subprocess
import sys

import recoup.receiver


def test_the_exported_names_are_the_intended_ones() -> None:
    assert recoup.receiver.__all__ == [
        "DEFAULT_LOCK_TIMEOUT",
        "DEFAULT_RETENTION",
        "DEFAULT_TOLERANCE",
        "ChargeAttempt",
        "ChargeEndpoint",
        "ChargeOutcome",
        "ChargeResult",
        "Database",
        "HttpResponse",
        "IdempotencyStore",
        "InvalidUpdateToken",
        "Invoice",
        "InvoiceBook",
        "LedgerEntry",
        "PostgresDatabase",
        "ReceiverError",
        "SignatureError",
        "SignedMessage",
        "SqliteDatabase",
        "TimestampOutOfTolerance",
        "UnknownInvoice",
        "UpdateToken",
        "body_fingerprint",
        "charge_invoice",
        "ledger_entries",
        "verify_signature",
        "verify_update_token",
    ]
    for name in recoup.receiver.__all__:
        assert getattr(recoup.receiver, name) is not None


def test_importing_the_receiver_does_not_import_a_web_framework() -> None:
    # Users on WSGI or plain ASGI should not pay for FastAPI; its integration is a submodule.
    code = "import sys, recoup.receiver; print('fastapi' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"
