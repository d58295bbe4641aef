"""`recoup tenants configure`: a tenant's dunning settings, where its attempts are charged
(its charge endpoint, or Stripe) and its Stripe intake, validated whole before anything is
stored.

Contract:

    recoup tenants configure NAME [--policy FILE|business-days|calendar] [--event-url URL]
        [--charge-url URL] [--experiment-policy FILE|PRESET --experiment-share 0.5
        --experiment-name NAME | --no-experiment]
        [--stripe-webhook-secret whsec_…|- | --no-stripe-webhook-secret]
        [--default-timezone ZONE] [--charge-with stripe|url] [--stripe-api-key-file PATH|-]
        [--smtp-url smtp://user:pass@host:port|- | --no-smtp-url]
        [--email-from "Acme Billing <billing@acme.example>"] [--reply-to ADDRESS]
        [--update-card-url https://app.example/billing/update?token={token}]
        [--email-templates DIR] [--allow-unsubscribe/--no-allow-unsubscribe]
        [--allow-private-targets] [--json]
        → {"tenant", "policy", "event_url", "charge_url", "updated_at", "experiment_name",
           "experiment_policy", "experiment_share", "stripe_webhook_secret_set",
           "default_timezone", "charge_with", "stripe_api_key_set", "smtp_configured",
           "email_from", "reply_to", "update_card_url", "email_templates",
           "allow_unsubscribe"}

A Stripe endpoint secret, a Stripe API key and an SMTP URL's password are never printed (`-`
reads any of them from stdin, out of the shell's history); all are stored sealed
(`recoup.sealed`). The email options are validated by `recoup.recovery.email_settings`.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from recoup.cli._app import (
    AllowCidrOption,
    AllowPrivateOption,
    DbOption,
    JsonOption,
    SchemaOption,
    print_json,
    ssrf_guard,
)
from recoup.cli._policy import load_policy
from recoup.cli._secrets import secret_box
from recoup.cli._where import TokenOption, UrlOption, Where, opened_client, where
from recoup.cli.tenants import _opened, tenants_app
from recoup.errors import InvalidInput, NotFound
from recoup.jobs.model import DEFAULT_TENANT
from recoup.timekeeping.instants import format_utc

if TYPE_CHECKING:
    from recoup.wire.dunning_settings import SettingsOut


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
    smtp_url: Annotated[
        str | None,
        typer.Option(
            help="The SMTP server customers' emails go through: smtp://user:pass@host:port "
            "(STARTTLS when offered; ?starttls=require to insist) or smtps://… (TLS); `-` "
            "reads it from stdin. Stored sealed, never printed. Omitted: kept."
        ),
    ] = None,
    no_smtp_url: Annotated[
        bool, typer.Option("--no-smtp-url", help="Remove the SMTP server: no more emails.")
    ] = False,
    email_from: Annotated[
        str | None,
        typer.Option(help='The sender, e.g. "Acme Billing <billing@acme.example>". Omitted: kept.'),
    ] = None,
    reply_to: Annotated[
        str | None, typer.Option(help="Where customers' replies go. Omitted: kept.")
    ] = None,
    update_card_url: Annotated[
        str | None,
        typer.Option(
            help="The emails' link when the provider has no payment page: an https URL with "
            "{token}, a signed token the app verifies (recoup.receiver.verify_update_token). "
            "Omitted: kept."
        ),
    ] = None,
    email_templates: Annotated[
        str | None,
        typer.Option(
            help="A directory of email templates overriding the shipped ones, file by file. "
            "Omitted: kept."
        ),
    ] = None,
    allow_unsubscribe: Annotated[
        bool | None,
        typer.Option(
            "--allow-unsubscribe/--no-allow-unsubscribe",
            help="Whether reminders carry List-Unsubscribe (required notices never do). "
            "Omitted: kept.",
        ),
    ] = None,
    allow_private_targets: AllowPrivateOption = False,
    allow_cidr: AllowCidrOption = None,
    db: DbOption = "sqlite:///recoup.db",
    schema: SchemaOption = None,
    url: UrlOption = None,
    token: TokenOption = None,
    json: JsonOption = False,
) -> None:
    """Set a tenant's dunning policy, event URL, where its attempts are charged (its charge
    endpoint, or Stripe), policy experiment and Stripe intake (validated whole before
    anything is stored)."""
    from recoup.jobs.scheduler import Scheduler
    from recoup.recovery.email_settings import EmailSettings
    from recoup.recovery.hosted_settings import CHARGE_WITH, HostedSettings
    from recoup.recovery.records import KEEP
    from recoup.recovery.service import Dunning
    from recoup.recovery.stripe_intake import StripeIntake

    secret = _stripe_secret(stripe_webhook_secret, no_stripe_webhook_secret)
    if charge_with is not None and charge_with not in CHARGE_WITH:
        raise InvalidInput("--charge-with", charge_with, f"expected one of {CHARGE_WITH}")
    api_key = KEEP if stripe_api_key_file is None else _read_key_file(stripe_api_key_file)
    smtp = _smtp_url(smtp_url, no_smtp_url)

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
    if url is not None or token is not None:
        place = where(db=None, schema=schema, tenant=name, url=url, token=token)
        for option, given_here in (
            ("--no-stripe-webhook-secret", no_stripe_webhook_secret),
            ("--no-smtp-url", no_smtp_url),
            ("--allow-private-targets", allow_private_targets),
            ("--allow-cidr", bool(allow_cidr)),
        ):
            if given_here:
                raise InvalidInput(option, True, "a database's option: not with --url")
        changes = {
            "policy": KEEP if policy_toml is None else policy_toml,
            "event_url": KEEP if event_url is None else event_url,
            "charge_url": KEEP if charge_url is None else charge_url,
            "experiment_name": experiment["experiment_name"],
            "experiment_policy": experiment["experiment_policy_toml"],
            "experiment_share": experiment["experiment_share"],
            "default_timezone": KEEP if default_timezone is None else default_timezone,
            "stripe_webhook_secret": None if secret is KEEP else secret,
            "charge_with": charge_with,
            "stripe_api_key": None if api_key is KEEP else api_key,
            "smtp_url": None if smtp is KEEP else smtp,
            "email_from": KEEP if email_from is None else email_from,
            "reply_to": KEEP if reply_to is None else reply_to,
            "update_card_url": KEEP if update_card_url is None else update_card_url,
            "email_templates": KEEP if email_templates is None else email_templates,
            "allow_unsubscribe": KEEP if allow_unsubscribe is None else allow_unsubscribe,
        }
        shown = _configured_remotely(place, changes)
        _print_configured(shown, json, policy=policy, experiment_policy=experiment_policy)
        return

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
        emails = EmailSettings(store.messages, box, now=scheduler.clock.now)
        try:
            wanted = intake.tenant_settings.settled(
                name,
                stripe_webhook_secret=secret,
                default_timezone=KEEP if default_timezone is None else default_timezone,
            )
            charging = hosted.settled(
                name,
                charge_with=KEEP if charge_with is None else charge_with,
                api_key=api_key,
            )
            emailing = emails.settled(
                name,
                smtp_url=smtp,
                email_from=KEEP if email_from is None else email_from,
                reply_to=KEEP if reply_to is None else reply_to,
                update_card_url=KEEP if update_card_url is None else update_card_url,
                templates_dir=KEEP if email_templates is None else email_templates,
                allow_unsubscribe=KEEP if allow_unsubscribe is None else allow_unsubscribe,
            )
        except InvalidInput as exc:
            field = _FIELD_OPTIONS.get(exc.field, exc.field)
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
        intake_stored = intake.tenant_settings.save(wanted)
        charged_by = hosted.save(charging)
        emailed = emails.save(emailing)
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
        "smtp_configured": emailed.smtp_url is not None,
        "email_from": emailed.email_from,
        "reply_to": emailed.reply_to,
        "update_card_url": emailed.update_card_url,
        "email_templates": emailed.templates_dir,
        "allow_unsubscribe": emailed.allow_unsubscribe,
    }
    _print_configured(row, json, policy=policy, experiment_policy=experiment_policy)


def _print_configured(
    row: dict[str, Any], json: bool, *, policy: str | None, experiment_policy: str | None
) -> None:
    """The settings stored (`row`, what `--json` prints), from a database or a server alike;
    `policy` and `experiment_policy` as given, to name them as the user did."""
    if json:
        print_json(row)
        return
    name = row["tenant"]
    typer.echo(f"tenant:     {name}")
    typer.echo(f"policy:     {policy or ('custom' if row['policy'] else 'business-days')}")
    typer.echo(f"event url:  {row['event_url'] or '(none: events stay in the timeline)'}")
    if row["charge_with"] == "stripe":
        typer.echo("charge:     through Stripe, by Recoup (the key is stored sealed)")
    typer.echo(f"charge url: {row['charge_url'] or '(none: each failure gives its own)'}")
    if row["experiment_name"] is not None:
        typer.echo(
            f"experiment: {row['experiment_name']}: {row['experiment_share']:.0%} of new "
            f"invoices on {experiment_policy or 'the stored second policy'}"
        )
    typer.echo(
        f"stripe:     webhooks at /v1/intake/stripe/{name}, zone by default "
        f"{row['default_timezone']}"
        if row["stripe_webhook_secret_set"]
        else "stripe:     (no endpoint secret: no Stripe intake)"
    )
    typer.echo(
        f"emails:     from {row['email_from']} (the SMTP URL is stored sealed)"
        if row["smtp_configured"] and row["email_from"] is not None
        else "emails:     (no SMTP server and sender: none sent)"
    )


def _configured_remotely(place: Where, changes: dict[str, Any]) -> dict[str, Any]:
    """The server's settings with `changes` made (KEEP: as they are), as `PUT
    /v1/dunning/settings` stores them: read, changed, written whole (the PUT replaces)."""
    from recoup.recovery.records import KEEP

    with opened_client(place) as (client, tenant):
        current = client.dunning_settings().model_dump()
        wanted: dict[str, Any] = {k: current.get(k) if v is KEEP else v for k, v in changes.items()}
        stored = client.configure_dunning(**wanted)
    return _settings_row(tenant, stored)


def _settings_row(tenant: str, stored: SettingsOut) -> dict[str, Any]:
    """What `--json` prints, from the settings as the API answers them."""
    row = stored.model_dump(mode="json")
    row["updated_at"] = format_utc(stored.updated_at)
    return {"tenant": tenant, **row}


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


# The settings fields whose option is not their name with dashes.
_FIELD_OPTIONS = {"stripe_api_key": "stripe_api_key_file", "templates_dir": "email_templates"}


def _smtp_url(given: str | None, remove: bool) -> Any:
    """The SMTP URL to set (`-`: read from stdin), None to remove it, or KEEP."""
    from recoup.recovery.records import KEEP

    if given is None:
        return None if remove else KEEP
    if remove:
        raise InvalidInput("--no-smtp-url", True, "expected without --smtp-url")
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
