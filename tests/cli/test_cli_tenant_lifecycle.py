"""`recoup tenants disable|enable|delete|rotate-secret`, on both backends."""

from __future__ import annotations

import io
import json
import sys

import pytest

from recoup.cli import main
from recoup.jobs.model import NewJob, PythonTarget
from recoup.storage import Store, open_api_tables
from recoup.tenancy import authenticate, identify
from recoup.timekeeping.clock import SystemClock
from tests.storage.conftest import Backend


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def created(backend: Backend, capsys: pytest.CaptureFixture[str], name: str) -> dict[str, str]:
    code, out, _ = run(capsys, "tenants", "create", name, *backend.db_args(), "--json")
    assert code == 0
    found: dict[str, str] = json.loads(out)
    return found


def test_disable_and_enable_switch_the_tokens_and_report_the_state(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    acme = created(backend, capsys, "acme")
    tables = open_api_tables(store)
    code, out, _ = run(capsys, "tenants", "disable", "acme", *backend.db_args(), "--json")
    assert code == 0
    state = json.loads(out)
    assert state["tenant"] == "acme" and state["disabled_at"].endswith("Z")
    assert identify(tables, acme["token"]) is not None
    assert authenticate(tables, acme["token"]) is None
    listed = json.loads(run(capsys, "tenants", "list", *backend.db_args(), "--json")[1])
    assert listed[0]["disabled_at"] == state["disabled_at"]
    code, out, _ = run(capsys, "tenants", "disable", "acme", *backend.db_args(), "--json")
    assert json.loads(out) == state  # idempotent: the first instant stays

    code, out, _ = run(capsys, "tenants", "enable", "acme", *backend.db_args(), "--json")
    assert code == 0 and json.loads(out) == {"tenant": "acme", "disabled_at": None}
    assert authenticate(tables, acme["token"]) == "acme"

    code, out, _ = run(capsys, "tenants", "disable", "acme", *backend.db_args())
    assert code == 0 and out.startswith("disabled acme")


@pytest.mark.parametrize("command", ["disable", "enable", "delete", "rotate-secret"])
def test_an_unknown_tenant_is_one_line_and_exit_2(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    extra = ["--yes"] if command == "delete" else []
    code, out, err = run(capsys, "tenants", command, "nobody", *extra, *backend.db_args())
    assert (code, out) == (2, "") and "no tenant 'nobody'" in err and err.count("\n") == 1


@pytest.mark.parametrize("command", ["disable", "delete"])
def test_the_default_tenant_is_refused_with_exit_2(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    extra = ["--yes"] if command == "delete" else []
    code, out, err = run(capsys, "tenants", command, "default", *extra, *backend.db_args())
    assert (code, out) == (2, "") and "embedded" in err and err.count("\n") == 1


def test_delete_needs_a_disabled_tenant_and_a_confirmation(
    backend: Backend,
    store: Store,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    acme = created(backend, capsys, "acme")
    store.insert(
        NewJob(tenant="acme", run_at=SystemClock().now(), target=PythonTarget(handler="x")),
        now=SystemClock().now(),
    )
    code, _, err = run(capsys, "tenants", "delete", "acme", "--yes", *backend.db_args())
    assert code == 1 and "disable it first" in err
    assert run(capsys, "tenants", "disable", "acme", *backend.db_args())[0] == 0

    # Not on a terminal and no --yes: refused, nothing asked, nothing deleted.
    code, out, err = run(capsys, "tenants", "delete", "acme", *backend.db_args())
    assert (code, out) == (2, "") and "--yes" in err
    # On a terminal, answering no aborts.
    terminal = io.StringIO("n\n")
    terminal.isatty = lambda: True  # type: ignore[method-assign]
    monkeypatch.setattr(sys, "stdin", terminal)
    code, _, err = run(capsys, "tenants", "delete", "acme", *backend.db_args())
    assert code == 130
    assert store.get_tenant("acme") is not None

    code, out, _ = run(capsys, "tenants", "delete", "acme", "--yes", *backend.db_args(), "--json")
    assert code == 0
    report = json.loads(out)
    assert report["tenant"] == "acme"
    assert report["deleted"]["jobs"] == 1 and report["deleted"]["api_tokens"] == 1
    assert report["deleted"]["tenants"] == 1
    assert store.get_tenant("acme") is None
    assert identify(open_api_tables(store), acme["token"]) is None
    assert json.loads(run(capsys, "tenants", "list", *backend.db_args(), "--json")[1]) == []


def test_rotate_secret_prints_the_new_secret_once_with_the_overlap(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    acme = created(backend, capsys, "acme")
    code, out, _ = run(
        capsys, "tenants", "rotate-secret", "acme", "--overlap", "90m", *backend.db_args(), "--json"
    )
    assert code == 0
    rotated = json.loads(out)
    assert rotated["tenant"] == "acme"
    assert rotated["signing_secret"].startswith("whsec_")
    assert rotated["signing_secret"] != acme["signing_secret"]
    tenant = store.get_tenant("acme")
    assert tenant is not None and tenant.signing_secret == rotated["signing_secret"]
    assert tenant.previous_signing_secret == acme["signing_secret"]
    assert tenant.previous_secret_until is not None
    assert rotated["previous_valid_until"] == tenant.previous_secret_until.isoformat().replace(
        "+00:00", "Z"
    )
    span = tenant.previous_secret_until - SystemClock().now()
    assert 85 * 60 < span.total_seconds() <= 90 * 60

    listed = run(capsys, "tenants", "list", *backend.db_args(), "--json")[1]
    assert json.loads(listed)[0]["rotating_until"] == rotated["previous_valid_until"]
    assert rotated["signing_secret"] not in listed and acme["signing_secret"] not in listed

    code, out, _ = run(
        capsys, "tenants", "rotate-secret", "acme", "--overlap", "0", *backend.db_args()
    )
    assert code == 0 and "no longer signs" in out
    tenant = store.get_tenant("acme")
    assert tenant is not None and tenant.previous_signing_secret is None
    assert tenant.signing_secret in out


def test_rotate_secret_makes_the_default_tenant_on_first_use(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "tenants", "rotate-secret", "default", *backend.db_args(), "--json")
    assert code == 0
    tenant = store.get_tenant("default")
    assert tenant is not None and tenant.signing_secret == json.loads(out)["signing_secret"]


@pytest.mark.parametrize("overlap", ["1 day", "24", "-1h", "31d", "h", "2w", "1h30"])
def test_a_bad_overlap_is_refused_before_anything_changes(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str], overlap: str
) -> None:
    acme = created(backend, capsys, "acme")
    code, out, err = run(
        capsys, "tenants", "rotate-secret", "acme", "--overlap", overlap, *backend.db_args()
    )
    assert (code, out) == (2, "") and "--overlap" in err and err.count("\n") == 1
    tenant = store.get_tenant("acme")
    assert tenant is not None and tenant.signing_secret == acme["signing_secret"]


def test_the_secret_command_is_gone(backend: Backend, capsys: pytest.CaptureFixture[str]) -> None:
    # A signing secret is printed when it is made, never again: no command reprints it.
    code, out, _ = run(capsys, "tenants", "secret", "default", *backend.db_args())
    assert code == 2 and "whsec_" not in out
