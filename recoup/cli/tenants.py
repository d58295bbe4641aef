"""`recoup tenants …` and `recoup tokens …`: who may call the HTTP API.

Contract:

    recoup tenants create NAME [--db URL] [--schema S] [--json]
        → {"tenant": NAME, "token": "rcp_…", "signing_secret": "whsec_…"}
    recoup tenants list [--db URL] [--json]
        → [{"id", "name", "created_at", "active_tokens", "token_prefixes", "disabled_at",
            "signing_secret_prefix", "rotating_until"}]
    recoup tenants disable|enable|delete|rotate-secret …   (see `recoup.cli.tenant_lifecycle`)
    recoup tenants configure NAME [--policy FILE|business-days|calendar] [--event-url URL]
        [--charge-url URL] [--experiment-policy FILE|PRESET --experiment-share 0.5
        --experiment-name NAME | --no-experiment]
        [--stripe-webhook-secret whsec_…|- | --no-stripe-webhook-secret]
        [--default-timezone ZONE] [--charge-with stripe|url] [--stripe-api-key-file PATH|-]
        [--allow-private-targets] [--json]
        → {"tenant", "policy", "event_url", "charge_url", "updated_at", "experiment_name",
           "experiment_policy", "experiment_share", "stripe_webhook_secret_set",
           "default_timezone", "charge_with", "stripe_api_key_set"}
    recoup tokens create TENANT [--label TEXT] [--json]
        → {"tenant", "token", "id", "prefix"}
    recoup tokens list [--tenant T] [--json]
        → [{"id", "tenant", "prefix", "label", "created_at", "revoked_at"}]
    recoup tokens revoke TOKEN_ID [--json]
        → {"id", "tenant", "prefix", "label", "created_at", "revoked_at"}

A token's secret is printed once, when it is created; only its hash is stored. The signing
secret signs the tenant's outbound requests (Standard Webhooks): give it to the receivers. It
is printed when it is made (`tenants create`, `tenants rotate-secret`) and never again:
listings show the first characters of tokens and secrets only. A Stripe endpoint secret is
never printed (`-` reads it from stdin, out of the shell's history), nor is a Stripe API key
(read from a file, or stdin); both are stored sealed (`recoup.sealed`).
A tenant name is its id: 1–63 lower-case letters, digits, `-`, `_` or `.`.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any

import typer

from recoup.cli._app import (
    AllowCidrOption,
    AllowPrivateOption,
    DbOption,
    JsonOption,
    SchemaOption,
    app,
    print_json,
    ssrf_guard,
    store_options,
)
from recoup.cli._policy import load_policy
from recoup.cli._secrets import secret_box
from recoup.errors import Conflict, InvalidInput, NotFound
from recoup.jobs.model import DEFAULT_TENANT
from recoup.tenancy import TokenInfo, issue_token, new_tenant
from recoup.timekeeping.clock import SystemClock
from recoup.timekeeping.instants import format_utc

if TYPE_CHECKING:
    from recoup.storage import ApiTables, Store

TENANT_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}")

tenants_app = typer.Typer(
    help="Tenants of the HTTP API: create (with a first token), list, configure, disable, "
    "enable, delete, rotate-secret.",
    no_args_is_help=True,
)
tokens_app = typer.Typer(
    help="API tokens of a tenant: create, list, revoke.",
    no_args_is_help=True,
)
app.add_typer(tenants_app, name="tenants")
app.add_typer(tokens_app, name="tokens")


@contextlib.contextmanager
def _opened(db: str, schema: str | None) -> Iterator[tuple[Store, ApiTables]]:
    from recoup.storage import open_api_tables, open_store

    store = open_store(db, **store_options(schema, db))
    try:
        yield store, open_api_tables(store)
    finally:
        store.close()


def _token_json(info: TokenInfo) -> dict[str, Any]:
    return {
        "id": info.id,
        "tenant": info.tenant,
        "prefix": info.prefix,
        "label": info.label,
        "created_at": format_utc(info.created_at),
        "revoked_at": None if info.revoked_at is None else format_utc(info.revoked_at),
    }


@tenants_app.command("create")
def create_tenant(
    name: Annotated[str, typer.Argument(help="The tenant's name, which is also its id.")],
    db: DbOption = "sqlite:///recoup.db",
    schema: SchemaOption = None,
    json: JsonOption = False,
) -> None:
    """Create a tenant with a signing secret and a first API token."""
    if not TENANT_NAME.fullmatch(name):
        raise InvalidInput(
            "NAME", name, "expected 1–63 lower-case letters, digits, '-', '_' or '.'"
        )
    if name == DEFAULT_TENANT:
        raise InvalidInput(
            "NAME",
            name,
            f"{DEFAULT_TENANT!r} is the embedded tenant of the Python API (made on first use); "
            f"choose another name, or `recoup tokens create {DEFAULT_TENANT}` for a token",
        )
    now = SystemClock().now()
    with _opened(db, schema) as (store, tables):
        if store.get_tenant(name) is not None:
            raise Conflict(
                f"tenant {name!r} exists; `recoup tokens create {name}` issues another token"
            )
        tenant = store.ensure_tenant(new_tenant(name, now=now))
        issued = issue_token(tables, tenant.id, now=now, label="first token")
    if json:
        print_json(
            {"tenant": tenant.id, "token": issued.secret, "signing_secret": tenant.signing_secret}
        )
        return
    typer.echo(f"tenant:         {tenant.id}")
    typer.echo(f"token:          {issued.secret}   (shown once; only its hash is stored)")
    typer.echo(f"signing secret: {tenant.signing_secret}")


@tenants_app.command("list")
def list_tenants(
    db: DbOption = "sqlite:///recoup.db", schema: SchemaOption = None, json: JsonOption = False
) -> None:
    """Every tenant: its state, the prefixes of its active tokens and of its signing secret
    (never the secrets)."""
    with _opened(db, schema) as (store, tables):
        tenants = store.list_tenants()
        prefixes: dict[str, list[str]] = {}
        for token in tables.list_tokens():
            if token.active:
                prefixes.setdefault(token.tenant, []).append(token.prefix)
    rows = [
        {
            "id": t.id,
            "name": t.name,
            "created_at": format_utc(t.created_at),
            "active_tokens": len(prefixes.get(t.id, [])),
            "token_prefixes": prefixes.get(t.id, []),
            "disabled_at": None if t.disabled_at is None else format_utc(t.disabled_at),
            "signing_secret_prefix": t.secret_prefix,
            "rotating_until": None if t.rotating_until is None else format_utc(t.rotating_until),
        }
        for t in tenants
    ]
    if json:
        print_json(rows)
        return
    for row in rows:
        state = f"disabled {row['disabled_at']}" if row["disabled_at"] else "enabled"
        rotating = f" (rotating until {row['rotating_until']})" if row["rotating_until"] else ""
        typer.echo(
            f"{row['id']}\t{row['created_at']}\t{state}\t{row['active_tokens']} active token(s)"
            f"\tsecret {row['signing_secret_prefix']}…{rotating}"
        )


@tokens_app.command("create")
def create_token(
    tenant: Annotated[str, typer.Argument(help="The tenant the token acts for.")],
    label: Annotated[str | None, typer.Option(help="A note to tell tokens apart.")] = None,
    db: DbOption = "sqlite:///recoup.db",
    schema: SchemaOption = None,
    json: JsonOption = False,
) -> None:
    """Issue another API token for a tenant (`default`, the embedded one, is made on first
    use, here too)."""
    from recoup.jobs.scheduler import Scheduler

    with _opened(db, schema) as (store, tables):
        if tenant == DEFAULT_TENANT:
            Scheduler(store).default_tenant()
        elif store.get_tenant(tenant) is None:
            raise NotFound(f"no tenant {tenant!r}; `recoup tenants create {tenant}` creates it")
        issued = issue_token(tables, tenant, now=SystemClock().now(), label=label)
    if json:
        print_json(
            {
                "tenant": tenant,
                "token": issued.secret,
                "id": issued.info.id,
                "prefix": issued.info.prefix,
            }
        )
        return
    typer.echo(f"token: {issued.secret}   (id {issued.info.id}; shown once)")


@tokens_app.command("list")
def list_tokens(
    tenant: Annotated[str | None, typer.Option(help="Only this tenant's tokens.")] = None,
    db: DbOption = "sqlite:///recoup.db",
    schema: SchemaOption = None,
    json: JsonOption = False,
) -> None:
    """Tokens (never their secrets), oldest first."""
    with _opened(db, schema) as (_, tables):
        rows = [_token_json(t) for t in tables.list_tokens(tenant)]
    if json:
        print_json(rows)
        return
    for row in rows:
        state = f"revoked {row['revoked_at']}" if row["revoked_at"] else "active"
        typer.echo(f"{row['id']}\t{row['tenant']}\t{row['prefix']}…\t{state}\t{row['label'] or ''}")


@tokens_app.command("revoke")
def revoke_token(
    token_id: Annotated[str, typer.Argument(help="The token's id (see `recoup tokens list`).")],
    db: DbOption = "sqlite:///recoup.db",
    schema: SchemaOption = None,
    json: JsonOption = False,
) -> None:
    """Revoke a token: requests with it get 401 from now on. Revoking twice is harmless."""
    with _opened(db, schema) as (_, tables):
        info = tables.revoke_token(token_id, now=SystemClock().now())
    if info is None:
        raise NotFound(f"no token {token_id!r}")
    if json:
        print_json(_token_json(info))
        return
    typer.echo(f"revoked {info.id} ({info.prefix}…) of tenant {info.tenant}")


@tenants_app.command("configure")
def configure_tenant(
    name: Annotated[str, typer.Argument(help="The tenant's name (`default`: the embedded one).")],
    policy: Annotated[
        str | None,
        typer.Option(
            help="Dunning policy: a TOML file, or a preset (business-days, calendar). "
            "Omitted: kept as it is."
        ),
    ] = None,
    event_url: Annotated[
        str | None, typer.Option(help="Where the signed invoice.* events go. Omitted: kept.")
    ] = None,
    charge_url: Annotated[
        str | None,
        typer.Option(help="The default retry-charge endpoint of failures. Omitted: kept."),
    ] = None,
    experiment_policy: Annotated[
        str | None,
        typer.Option(
            help="A policy experiment's second policy (arm b): a TOML file or a preset, named "
            "apart from --policy. Omitted: kept."
        ),
    ] = None,
    experiment_share: Annotated[
        float | None,
        typer.Option(help="The share of new invoices planned with arm b (0–1). Omitted: kept."),
    ] = None,
    experiment_name: Annotated[
        str | None,
        typer.Option(help="The experiment's name (the split hashes it). Omitted: kept."),
    ] = None,
    no_experiment: Annotated[
        bool, typer.Option("--no-experiment", help="End the policy experiment.")
    ] = False,
    stripe_webhook_secret: Annotated[
        str | None,
        typer.Option(
            help="The Stripe endpoint's signing secret (whsec_…), which verifies webhooks at "
            "/v1/intake/stripe/NAME; `-` reads it from stdin. Never printed. Omitted: kept."
        ),
    ] = None,
    no_stripe_webhook_secret: Annotated[
        bool,
        typer.Option("--no-stripe-webhook-secret", help="Remove the Stripe endpoint secret."),
    ] = False,
    default_timezone: Annotated[
        str | None,
        typer.Option(
            help="The IANA zone of customers whose Stripe events name none (at first UTC). "
            "Omitted: kept."
        ),
    ] = None,
    charge_with: Annotated[
        str | None,
        typer.Option(
            help="Where attempts are charged: `stripe` (Recoup pays the Stripe invoice itself, "
            "with --stripe-api-key-file) or `url` (the charge endpoint, --charge-url). "
            "Omitted: kept."
        ),
    ] = None,
    stripe_api_key_file: Annotated[
        str | None,
        typer.Option(
            help="A file holding the Stripe secret or restricted key (sk_…/rk_…) to charge "
            "with; `-` reads it from stdin. Stored sealed, never printed. Omitted: kept."
        ),
    ] = None,
    allow_private_targets: AllowPrivateOption = False,
    allow_cidr: AllowCidrOption = None,
    db: DbOption = "sqlite:///recoup.db",
    schema: SchemaOption = None,
    json: JsonOption = False,
) -> None:
    """Set a tenant's dunning policy, event URL, where its attempts are charged (its charge
    endpoint, or Stripe), policy experiment and Stripe intake (validated whole before
    anything is stored)."""
    from recoup.jobs.scheduler import Scheduler
    from recoup.recovery.hosted_settings import CHARGE_WITH, HostedSettings
    from recoup.recovery.records import KEEP
    from recoup.recovery.service import Dunning
    from recoup.recovery.stripe_intake import StripeIntake

    secret = _stripe_secret(stripe_webhook_secret, no_stripe_webhook_secret)
    if charge_with is not None and charge_with not in CHARGE_WITH:
        raise InvalidInput("--charge-with", charge_with, f"expected one of {CHARGE_WITH}")
    api_key = KEEP if stripe_api_key_file is None else _read_key_file(stripe_api_key_file)

    policy_toml = load_policy(policy).text if policy is not None else None
    experiment: dict[str, Any] = {
        "experiment_policy_toml": (
            load_policy(experiment_policy, "--experiment-policy").text
            if experiment_policy is not None
            else KEEP
        ),
        "experiment_share": KEEP if experiment_share is None else experiment_share,
        "experiment_name": KEEP if experiment_name is None else experiment_name,
    }
    if no_experiment:
        given = [name for name, value in experiment.items() if value is not KEEP]
        if given:
            raise InvalidInput("--no-experiment", True, f"expected without {_option(given[0])}")
        experiment = dict.fromkeys(experiment)
    with _opened(db, schema) as (store, _):
        scheduler = Scheduler(store, ssrf=ssrf_guard(allow_private_targets, allow_cidr))
        if name == DEFAULT_TENANT:
            scheduler.default_tenant()
        elif store.get_tenant(name) is None:
            raise NotFound(f"no tenant {name!r}; `recoup tenants create {name}` creates it")
        dunning = Dunning(scheduler, store)
        box = secret_box(db)
        intake = StripeIntake(dunning, store, box=box)
        hosted = HostedSettings(store.hosted, box, now=scheduler.clock.now)
        try:
            wanted = intake.settled(
                name,
                stripe_webhook_secret=secret,
                default_timezone=KEEP if default_timezone is None else default_timezone,
            )
            charging = hosted.settled(
                name,
                charge_with=KEEP if charge_with is None else charge_with,
                api_key=api_key,
            )
        except InvalidInput as exc:
            field = "stripe_api_key_file" if exc.field == "stripe_api_key" else exc.field
            raise InvalidInput(_option(field), exc.value, exc.allowed) from None
        try:
            stored = dunning.configure(
                name,
                policy_toml=KEEP if policy_toml is None else policy_toml,
                event_url=KEEP if event_url is None else event_url,
                charge_url=KEEP if charge_url is None else charge_url,
                **experiment,
            )
        except InvalidInput as exc:
            if not exc.field.startswith("experiment_"):
                raise
            raise InvalidInput(_option(exc.field), exc.value, exc.allowed) from None
        intake_stored = intake.save(wanted)
        charged_by = hosted.save(charging)
    row = {
        "tenant": name,
        "policy": stored.policy_toml,
        "event_url": stored.event_url,
        "charge_url": stored.charge_url,
        "updated_at": format_utc(stored.updated_at),
        "experiment_name": stored.experiment_name,
        "experiment_policy": stored.experiment_policy_toml,
        "experiment_share": stored.experiment_share,
        "stripe_webhook_secret_set": intake_stored.stripe_webhook_secret is not None,
        "default_timezone": intake_stored.default_timezone,
        "charge_with": "url" if charged_by is None else charged_by.provider,
        "stripe_api_key_set": charged_by is not None,
    }
    if json:
        print_json(row)
        return
    typer.echo(f"tenant:     {name}")
    typer.echo(f"policy:     {policy or ('custom' if stored.policy_toml else 'business-days')}")
    typer.echo(f"event url:  {stored.event_url or '(none: events stay in the timeline)'}")
    if charged_by is not None:
        typer.echo("charge:     through Stripe, by Recoup (the key is stored sealed)")
    typer.echo(f"charge url: {stored.charge_url or '(none: each failure gives its own)'}")
    if stored.has_experiment:
        typer.echo(
            f"experiment: {stored.experiment_name}: {stored.experiment_share:.0%} of new "
            f"invoices on {experiment_policy or 'the stored second policy'}"
        )
    typer.echo(
        f"stripe:     webhooks at /v1/intake/stripe/{name}, zone by default "
        f"{intake_stored.default_timezone}"
        if intake_stored.stripe_webhook_secret
        else "stripe:     (no endpoint secret: no Stripe intake)"
    )


def _stripe_secret(given: str | None, remove: bool) -> Any:
    """The secret to set (`-`: read from stdin), None to remove it, or KEEP."""
    from recoup.recovery.records import KEEP

    if given is None:
        return None if remove else KEEP
    if remove:
        raise InvalidInput(
            "--no-stripe-webhook-secret", True, "expected without --stripe-webhook-secret"
        )
    return sys.stdin.readline().strip() if given == "-" else given


def _read_key_file(path: str) -> str:
    """The key in a file (`-`: stdin), its surrounding whitespace dropped."""
    if path == "-":
        return sys.stdin.readline().strip()
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip()
    except OSError as exc:
        raise InvalidInput(
            "--stripe-api-key-file", path, f"expected a readable file ({exc.strerror})"
        ) from None


def _option(field: str) -> str:
    """The option of a settings field the runtime names (`experiment_policy.name` →
    `--experiment-policy: name`)."""
    head, _, inside = field.partition(".")
    option = "--" + head.removesuffix("_toml").replace("_", "-")
    return f"{option}: {inside}" if inside else option
