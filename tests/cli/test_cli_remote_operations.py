"""`recoup merchants tag|untag|review`, `recoup tenants configure`, `recoup emails preview` and
`recoup invoices show` with `--url` and `--token`, against a real server (one per module and
backend): each prints what it prints with `--db` on the server's database, and acts on the
server's store. And an unknown id is the same one line and exit 2 from either place."""

from __future__ import annotations

import json

import pytest

from recoup.dunning.policy import preset_text
from tests.cli.remote_server import Served, Tenant, served
from tests.cli.test_cli import run
from tests.cli.test_cli_remote_dunning import dunning, opened
from tests.cli.test_cli_remote_jobs import both, refused, remote_json

__all__ = ["served"]


def named(
    capsys: pytest.CaptureFixture[str], served: Served, tenant: Tenant, *argv: str
) -> tuple[str, str]:
    """`both` for the commands that take the tenant as an argument: on the server's database
    (no --tenant) and through the server."""
    printed = []
    for where in (served.db, tenant.remote):
        code, out, err = run(capsys, *argv, *where)
        assert code == 0, err
        printed.append(out)
    return printed[0], printed[1]


def test_merchants_tag_review_and_untag_print_the_same_through_the_server(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    tenant = served.tenant()
    shown = remote_json(
        capsys, tenant, "merchants", "tag", tenant.name, "m-1", "--tag", "seasonal",
        "--note", "ski season",
    )  # fmt: skip
    assert (shown["merchant_id"], shown["tag"], shown["note"]) == ("m-1", "seasonal", "ski season")
    [stored] = served.store.merchant_tags(tenant.name)
    assert (stored.merchant_id, stored.tag, stored.note) == ("m-1", "seasonal", "ski season")
    local, remote = named(capsys, served, tenant, "merchants", "review", tenant.name, "--json")
    local_doc, remote_doc = json.loads(local), json.loads(remote)
    assert [t["merchant_id"] for t in remote_doc["tags"]] == ["m-1"]
    for document in (local_doc, remote_doc):  # each judged as of the instant it was asked
        document.pop("now"), document.pop("since")
    assert local_doc == remote_doc
    # Removed once through the server; a second time there is nothing to remove, both ways.
    code, out, err = run(capsys, "merchants", "untag", tenant.name, "m-1", *tenant.remote)
    assert (code, out) == (0, "untagged m-1\n"), err
    assert served.store.merchant_tags(tenant.name) == []
    local, remote = named(
        capsys, served, tenant, "merchants", "untag", tenant.name, "m-1", "--json"
    )
    assert json.loads(local) == json.loads(remote) == {"merchant_id": "m-1", "removed": False}


def test_merchants_refusals_through_the_server_are_one_line(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    tenant = served.tenant()
    err = refused(capsys, tenant, "merchants", "tag", tenant.name, "m-1", "--tag", "odd")
    assert "--tag" in err and "odd" in err
    err = refused(capsys, tenant, "merchants", "review", "someone-else")
    assert "--tenant" in err and "someone-else" in err  # the token acts for another tenant
    err = refused(capsys, tenant, "merchants", "review", tenant.name, "--now", "2026-01-01")
    assert "--now" in err


def test_tenants_configure_through_the_server_keeps_what_is_not_given(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    tenant = served.tenant()
    first = remote_json(
        capsys, tenant, "tenants", "configure", tenant.name, "--policy", "calendar",
        "--event-url", "http://127.0.0.1:9/events",
    )  # fmt: skip
    assert first["policy"] == preset_text("calendar")
    assert first["event_url"] == "http://127.0.0.1:9/events"
    # Only the charge URL given: the policy and the event URL stay as they were.
    second = remote_json(
        capsys, tenant, "tenants", "configure", tenant.name, "--charge-url",
        "http://127.0.0.1:9/charge",
    )  # fmt: skip
    assert (second["policy"], second["event_url"], second["charge_url"]) == (
        preset_text("calendar"),
        "http://127.0.0.1:9/events",
        "http://127.0.0.1:9/charge",
    )
    stored = dunning(served).settings(tenant.name)
    assert (stored.event_url, stored.charge_url) == (
        "http://127.0.0.1:9/events",
        "http://127.0.0.1:9/charge",
    )
    # Nothing given: the same settings printed both ways (the local run writes them again).
    local, remote = named(capsys, served, tenant, "tenants", "configure", tenant.name, "--json")
    local_doc, remote_doc = json.loads(local), json.loads(remote)
    for document in (local_doc, remote_doc):
        document.pop("updated_at")
    assert local_doc == remote_doc
    local, remote = named(capsys, served, tenant, "tenants", "configure", tenant.name)
    assert local == remote and "event url:  http://127.0.0.1:9/events" in remote


def test_tenants_configure_refuses_what_needs_the_database_with_a_server(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    tenant = served.tenant()
    err = refused(capsys, tenant, "tenants", "configure", tenant.name, "--no-smtp-url")
    assert "--no-smtp-url" in err
    err = refused(capsys, tenant, "tenants", "configure", tenant.name, "--event-url", "ftp://x")
    assert "event_url" in err and "ftp://x" in err  # the server's 422, naming the field


@pytest.mark.parametrize(
    "extra", [[], ["--json"], ["--html"], ["--locale", "de_DE"], ["--event", "exhausted"]]
)
def test_emails_preview_through_the_server_is_the_databases(
    served: Served, capsys: pytest.CaptureFixture[str], extra: list[str]
) -> None:
    tenant = served.tenant()
    argv = ["emails", "preview", "--tenant", tenant.name]
    kind = [] if "--event" in extra else ["--event", "payment_failed"]
    local, remote = both(capsys, tenant, *argv, *kind, *extra)
    assert local == remote and remote


def test_emails_preview_bad_input_through_the_server_names_the_option(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    tenant = served.tenant()
    argv = ["emails", "preview", "--tenant", tenant.name]
    assert "--event" in refused(capsys, tenant, *argv, "--event", "nope")
    err = refused(capsys, tenant, *argv, "--event", "recovered", "--locale", "xx_nowhere")
    assert "--locale" in err


def test_invoices_show_through_the_server_prints_as_the_database(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    tenant = served.tenant()
    opened(served, tenant, "in_show")
    stored = dunning(served).get(tenant.name, "in_show")
    local, remote = both(capsys, tenant, "invoices", "show", "in_show", "--json")
    assert local == remote
    shown = json.loads(remote)
    assert [a["attempt"] for a in shown["attempts"]] == [a.attempt for a in stored.attempts]
    assert shown["state"] == "retrying" and shown["timezone"] == "Europe/Paris"
    local, remote = both(capsys, tenant, "invoices", "show", "in_show")
    assert local == remote and remote.startswith("invoice in_show: retrying")


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["invoices", "show", "in_nope"], "in_nope"),
        (["invoices", "cancel", "in_nope", "--reason", "r"], "in_nope"),
        (["customers", "show", "cus_nope"], "cus_nope"),
        (["jobs", "show", "job_nope"], "job_nope"),
        (["jobs", "runs", "job_nope"], "job_nope"),
        (["jobs", "cancel", "job_nope"], "job_nope"),
        (["schedules", "show", "sch_nope"], "sch_nope"),
    ],
)
def test_an_unknown_id_is_one_line_and_exit_2_from_either_place(
    served: Served, capsys: pytest.CaptureFixture[str], argv: list[str], named: str
) -> None:
    tenant = served.tenant()
    printed = []
    for where in (tenant.local, tenant.remote):
        code, out, err = run(capsys, *argv, *where)
        assert (code, out) == (2, ""), (where, err)
        assert err.count("\n") == 1 and named in err and tenant.token not in err
        printed.append(err)
    assert printed[0] == printed[1]  # the same words: the server's 404 is the store's NotFound
