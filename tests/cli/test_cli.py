"""`recoup tenants …` and `recoup tokens …`, on both backends."""

from __future__ import annotations

import json

import pytest

from recoup.cli import main
from recoup.storage import Store, open_api_tables
from recoup.tenancy import authenticate
from tests.storage.conftest import Backend


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_tenants_create_prints_the_tenant_a_token_and_a_signing_secret(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "tenants", "create", "acme", *backend.db_args(), "--json")
    assert code == 0
    created = json.loads(out)
    assert set(created) == {"tenant", "token", "signing_secret"}
    assert created["tenant"] == "acme"
    assert created["signing_secret"].startswith("whsec_")
    assert authenticate(open_api_tables(store), created["token"]) == "acme"
    assert store.get_tenant("acme").signing_secret == created["signing_secret"]
    # The secret is printed once and stored only as a hash.
    code, out, _ = run(capsys, "tokens", "list", *backend.db_args(), "--json")
    assert created["token"] not in out
    assert [t["tenant"] for t in json.loads(out)] == ["acme"]


def test_creating_a_tenant_twice_is_refused(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, "tenants", "create", "acme", *backend.db_args())[0] == 0
    code, _, err = run(capsys, "tenants", "create", "acme", *backend.db_args())
    assert code == 1 and "exists" in err and err.count("\n") == 1


@pytest.mark.parametrize("name", ["Acme", "with space", "", "_underscore-first", "x" * 64])
def test_tenant_names_are_checked(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    code, _, err = run(capsys, "tenants", "create", name, *backend.db_args())
    assert code == 2 and "NAME" in err


def test_tokens_are_created_listed_and_revoked(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    tables = open_api_tables(store)
    first = json.loads(run(capsys, "tenants", "create", "acme", *backend.db_args(), "--json")[1])
    code, out, _ = run(
        capsys, "tokens", "create", "acme", "--label", "ci", *backend.db_args(), "--json"
    )
    second = json.loads(out)
    assert code == 0 and second["tenant"] == "acme"
    listed = json.loads(
        run(capsys, "tokens", "list", "--tenant", "acme", *backend.db_args(), "--json")[1]
    )
    assert [t["label"] for t in listed] == ["first token", "ci"]
    assert all(t["revoked_at"] is None for t in listed)

    code, out, _ = run(capsys, "tokens", "revoke", second["id"], *backend.db_args(), "--json")
    assert code == 0 and json.loads(out)["revoked_at"] is not None
    assert authenticate(tables, second["token"]) is None
    assert authenticate(tables, first["token"]) == "acme"
    assert run(capsys, "tokens", "revoke", second["id"], *backend.db_args())[0] == 0  # idempotent
    code, _, err = run(capsys, "tokens", "revoke", "no-such-token", *backend.db_args())
    assert code == 2 and "no token" in err
    code, _, err = run(capsys, "tokens", "create", "nobody", *backend.db_args())
    assert code == 2 and "no tenant" in err

    tenants = json.loads(run(capsys, "tenants", "list", *backend.db_args(), "--json")[1])
    assert tenants == [
        {
            "id": "acme",
            "name": "acme",
            "created_at": tenants[0]["created_at"],
            "active_tokens": 1,
            "token_prefixes": [first["token"][:12]],
            "disabled_at": None,
            "signing_secret_prefix": first["signing_secret"][:10],
            "rotating_until": None,
        }
    ]


def test_the_embedded_default_tenant_cannot_be_created(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "tenants", "create", "default", *backend.db_args())
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert "embedded tenant" in err and "tokens create default" in err
    assert store.get_tenant("default") is None  # nothing was written


def test_a_token_for_the_default_tenant_makes_the_tenant_on_first_use(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "tokens", "create", "default", *backend.db_args(), "--json")
    assert code == 0, err
    issued = json.loads(out)
    assert issued["tenant"] == "default"
    assert authenticate(open_api_tables(store), issued["token"]) == "default"
    assert store.get_tenant("default") is not None
