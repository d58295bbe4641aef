"""Payments: the provider protocol, and a simulated gateway to test and demo against, in-process
(`SimulatedGateway`) or over HTTP on loopback (`create_gateway_app`, `GatewayClient`).

The HTTP pieces load on first use: code that needs only the protocol (the receiver, recovery)
should not pay for importing a web framework and an HTTP client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from recoup.payments.faults import Fault, FaultKind
from recoup.payments.faults_in_force import InjectedFault
from recoup.payments.gateway import GatewayStats, SimulatedGateway
from recoup.payments.provider import (
    Charge,
    ChargeRequest,
    ChargeStatus,
    IdempotencyKeyMismatch,
    PaymentError,
    PaymentProvider,
    ProviderTimeout,
    ProviderUnavailable,
)
from recoup.payments.scenarios import Combine, Scenario

if TYPE_CHECKING:
    from recoup.payments.http_client import GatewayClient
    from recoup.payments.server import create_gateway_app

_LAZY = {
    "GatewayClient": "recoup.payments.http_client",
    "create_gateway_app": "recoup.payments.server",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'recoup.payments' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
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
