"""`recoup customers show|set` on both backends: one JSON shape with the API's, what is left
out kept, bad input one line and exit 2 naming the option, an unknown customer exit 1."""

from __future__ import annotations

import json

import pytest

from tests.cli.test_cli import run
from tests.storage.conftest import Backend, Store


def test_set_then_show_a_customer(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(
        capsys, "customers", "set", "cus_1", "--email", "Ada@Example.COM", "--locale", "de-DE",
        *backend.db_args(), "--json",
    )  # fmt: skip
    assert code == 0, err
    shown = json.loads(out)
    assert (shown["email"], shown["locale"], shown["access"]) == (
        "Ada@example.com",
        "de_DE",
        "active",
    )
    code, out, err = run(capsys, "customers", "set", "cus_1", "--name", "Ada", *backend.db_args())
    assert code == 0, err
    assert "name: Ada" in out and "email: Ada@example.com" in out  # kept
    code, out, _ = run(capsys, "customers", "show", "cus_1", *backend.db_args(), "--json")
    assert code == 0 and json.loads(out)["name"] == "Ada"
    assert set(json.loads(out)) >= {"access", "suppressed", "access_changed_at"}


def test_bad_input_names_the_option_and_an_unknown_customer_is_not_found(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "customers", "set", "cus_1", "--email", "ada", *backend.db_args())
    assert code == 2 and err.startswith("error: --email:") and len(err.splitlines()) == 1
    code, _, err = run(capsys, "customers", "set", "cus_1", "--locale", "x!", *backend.db_args())
    assert code == 2 and "--locale" in err
    code, _, err = run(capsys, "customers", "show", "cus_404", *backend.db_args())
    assert code == 2 and "cus_404" in err
