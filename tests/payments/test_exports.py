"""The public surface of `recoup.payments` is the intended one, and the protocol alone stays
light."""

from __future__ import annotations

import subprocess
import sys

import pytest

import recoup.payments


def test_the_exports_are_the_intended_ones_and_sorted() -> None:
    assert recoup.payments.__all__ == [
        "Charge",
        "ChargeRequest",
        "ChargeStatus",
        "Combine",
        "Fault",
        "FaultKind",
        "GatewayClient",
        "GatewayStats",
        "IdempotencyKeyMismatch",
        "InjectedFault",
        "PaymentError",
        "PaymentProvider",
        "ProviderTimeout",
        "ProviderUnavailable",
        "Scenario",
        "SimulatedGateway",
        "create_gateway_app",
    ]
    for name in recoup.payments.__all__:
        assert getattr(recoup.payments, name).__module__.startswith("recoup.payments.")


def test_importing_the_package_loads_no_web_framework() -> None:
    probe = "import sys, recoup.payments; print(sorted({'starlette', 'httpx'} & set(sys.modules)))"
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert loaded.stdout.strip() == "[]"


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="nope"):
        recoup.payments.nope  # noqa: B018
