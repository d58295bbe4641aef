"""Django for these tests only: the settings are loaded and the apps set up when this package
is collected, and nowhere else, so the rest of the suite runs as if pytest-django were not
installed (it stays inert until Django is configured). The environment variable is removed
again once read, so no subprocess of another test inherits it.

Each test that takes the `database` fixture runs twice, on SQLite ("default") and on
PostgreSQL ("postgres"), inside a transaction rolled back at its end; a test marked
`real_transactions` (threads, migrations) commits for real instead, and its tables are emptied
afterwards (slower). PostgreSQL follows the `postgres_url` rule: skipped when unreachable,
failed under CI=true.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any, TypeVar

import pytest

pytest.importorskip("django", reason="recoup[django] is not installed")
pytest.importorskip("pytest_django", reason="pytest-django is not installed")

os.environ["DJANGO_SETTINGS_MODULE"] = "tests.contrib_django.settings"
import django
from django.conf import settings

django.setup()
os.environ.pop("DJANGO_SETTINGS_MODULE")

from django.db import connections  # noqa: E402
from django.test import Client  # noqa: E402

from recoup.jobs.signing import signature_headers  # noqa: E402
from recoup.payments import SimulatedGateway  # noqa: E402
from recoup.timekeeping.clock import VirtualClock  # noqa: E402
from tests.conftest import postgres_unreachable  # noqa: E402
from tests.contrib_django.billing import payments, views  # noqa: E402
from tests.contrib_django.billing.models import Invoice  # noqa: E402
from tests.contrib_django.routing import ChosenDatabase  # noqa: E402
from tests.contrib_django.settings import POSTGRES_URL  # noqa: E402

NOW = datetime(2026, 12, 2, 16, 12, tzinfo=UTC)  # the instant deliveries are received
POSTGRES_UNREACHABLE = postgres_unreachable(POSTGRES_URL)
T = TypeVar("T")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "real_transactions: commit for real (threads see each other's writes); tables are "
        "emptied after the test",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "database" not in metafunc.fixturenames:
        return
    real = metafunc.definition.get_closest_marker("real_transactions") is not None

    def _on(alias: str) -> Any:
        return pytest.mark.django_db(transaction=real, databases=[alias])

    postgres_marks: list[Any] = [pytest.mark.postgres]
    if POSTGRES_UNREACHABLE is None:
        postgres_marks.append(_on("postgres"))
    elif os.environ.get("CI") != "true":
        # No django_db mark: pytest-django would try to create its test database.
        postgres_marks.append(pytest.mark.skip(reason=POSTGRES_UNREACHABLE))
    metafunc.parametrize(
        "database",
        [
            pytest.param("default", marks=_on("default"), id="sqlite"),
            pytest.param("postgres", marks=postgres_marks, id="postgres"),
        ],
        indirect=True,
    )


@pytest.fixture
def database(request: pytest.FixtureRequest) -> Iterator[str]:
    """The alias of the test's database; every model is routed to it."""
    alias: str = request.param
    if alias == "postgres" and POSTGRES_UNREACHABLE is not None:
        pytest.fail(POSTGRES_UNREACHABLE)  # under CI=true only: the param is skipped otherwise
    ChosenDatabase.alias = alias
    yield alias
    ChosenDatabase.alias = "default"


@pytest.fixture
def clock() -> Iterator[VirtualClock]:
    """The decorators' clock, at NOW."""
    views.CLOCK.current = VirtualClock(NOW)
    views.entered.clear()
    views.release.clear()
    yield views.CLOCK.current
    views.release.set()  # a view still waiting must not outlive its test
    views.CLOCK.current = None


@pytest.fixture
def gateway(clock: VirtualClock) -> Iterator[SimulatedGateway]:
    """The provider the billing app charges through: every card succeeds unless told."""
    found = SimulatedGateway(VirtualClock(NOW), seed=1)
    payments.provider.current = found
    yield found
    payments.provider.current = None
    payments.Invoices.crashes = 0
    payments.Invoices.for_update = True


@pytest.fixture
def client() -> Client:
    """A test client that answers a view's exception with 500, as a server would."""
    return Client(raise_request_exception=False)


def charge_body(
    invoice_id: str = "inv_1", attempt: int = 2, *, amount: int = 1999, **changes: Any
) -> dict[str, Any]:
    """A charge request as Recoup sends it."""
    return {
        "invoice_id": invoice_id,
        "attempt": attempt,
        "idempotency_key": f"retry:{invoice_id}:{attempt}",
        "charge_idempotency_key": f"charge:{invoice_id}:{attempt}",
        "amount": amount,
        "currency": "usd",
        "customer_id": "cus_1",
        "scheduled_at": "2026-12-02T16:12:00Z",
    } | changes


def deliver(
    client: Client,
    path: str,
    body: dict[str, Any] | bytes,
    *,
    message_id: str = "msg_1",
    key: str | None = None,
    secret: str | None = None,
    at: datetime = NOW,
    headers: dict[str, str] | None = None,
) -> Any:
    """POST `body` to `path` signed as Recoup signs it; `key` is the Idempotency-Key (by
    default the body's `idempotency_key` if it has one, else none; "" for none)."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    signed = signature_headers(
        secret=secret or settings.RECOUP_SIGNING_SECRET,
        message_id=message_id,
        timestamp=at,
        body=raw.decode(),
    )
    if key is None and isinstance(body, dict) and "idempotency_key" in body:
        key = body["idempotency_key"]
    if key:
        signed["Idempotency-Key"] = key
    return client.post(
        path, data=raw, content_type="application/json", headers=signed | (headers or {})
    )


def add_invoice(
    invoice_id: str = "inv_1", *, amount: int = 1999, card: str = "card_ok", status: str = "open"
) -> Invoice:
    return Invoice.objects.create(
        id=invoice_id, customer_id="cus_1", amount=amount, card=card, status=status
    )


_BACKGROUND: list[threading.Thread] = []


@pytest.fixture(autouse=True)
def _no_thread_outlives_its_test() -> Iterator[None]:
    # Torn down after the gates and views are released (fixtures the test asked for), and
    # before the test's database is emptied, which a thread still writing would block.
    yield
    while _BACKGROUND:
        _BACKGROUND.pop().join(timeout=60)


def in_background(work: Callable[[], T]) -> Callable[[], T]:
    """Start `work` in a thread of its own; call the result to wait for its value. The thread
    closes its database connections, as a request's end would."""
    box: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            box.append(work())
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    _BACKGROUND.append(thread)

    def result() -> T:
        thread.join(timeout=60)
        assert not thread.is_alive(), "the background work did not finish"
        if errors:
            raise errors[0]
        return box[0]

    return result


def in_threads(work: list[Callable[[], T]]) -> list[T]:
    """Run each callable in a thread of its own, all at once; their results in order. Each
    thread closes its database connections, as a request's end would."""
    results: list[Any] = [None] * len(work)
    errors: list[BaseException] = []
    start = threading.Barrier(len(work))

    def run(i: int) -> None:
        try:
            start.wait(timeout=30)
            results[i] = work[i]()
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(work))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a thread did not finish"
    if errors:
        raise errors[0]
    return results
