"""The words of a customer email: a `MessageContext` rendered by Jinja2 templates into a
subject, a text part and an HTML part (`composing.py` puts them in an email).

Templates: `recoup/messages/templates/` ships the defaults, three files per kind
(`{kind}.subject.txt`, `{kind}.txt`, `{kind}.html`) over two layouts (`_layout.txt`,
`_layout.html`). A tenant's `templates_dir` overrides any of them by name and falls back to
the defaults for the rest. HTML is autoescaped, text is not; an undefined name is an error
(StrictUndefined), so a typo in a tenant's template fails its preview rather than sending a
blank. What a template sees is `MessageContext`'s fields plus, formatted with babel in the
customer's locale and zone (`formatting.py`): `amount` ("$19.99", "19,99 €"; the minor units are
`amount_minor`), `next_attempt`, `respond_by_date`, `renews_on` (full local dates, or None),
`card_expiry` ("07/2026"), and the final action in words (`final_action_future`: "your
access will be paused"; `final_action_past`), and `is_reminder` (a kind the customer may
opt out of, rather than a required notice). The functions `money(minor_units, currency)`,
`local_date(instant)` and `local_datetime(instant)` do the same for a tenant's own use.

jinja2 and babel (the `email` extra) are imported where they are used: importing this module
needs neither.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recoup.errors import InvalidInput
from recoup.messages.formatting import (
    DEFAULT_LOCALE,
    check_locale,
    format_local_date,
    format_local_datetime,
    format_money,
    locale_or_default,
)
from recoup.messages.kinds import MessageKind
from recoup.messages.planning import PlannedMessage
from recoup.timekeeping.instants import parse_instant, require_aware
from recoup.timekeeping.zones import zone

if TYPE_CHECKING:
    import jinja2

# The sample instant of previews: a Tuesday afternoon, so the dates in them read naturally.
SAMPLE_AT = datetime(2026, 6, 23, 15, 0, tzinfo=UTC)

# What happens at the end of dunning, in the customer's words: (before, after).
_FINAL_ACTION_WORDS: dict[str, tuple[str, str]] = {
    "pause_access": ("your access will be paused", "your access has been paused"),
    "cancel": ("your subscription will be cancelled", "your subscription has been cancelled"),
    "mark_uncollectible": (
        "the invoice will be closed as unpaid",
        "the invoice has been closed as unpaid",
    ),
    "leave_past_due": (
        "your account will stay past due",
        "your account is past due",
    ),
}
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True, kw_only=True)
class MessageContext:
    """Everything one email says, before formatting. Instants are aware; `amount` is in
    minor units of `currency`; `locale` is a CLDR locale ("en", "fr_FR", "de-DE")."""

    kind: MessageKind
    tenant_name: str
    sender_name: str
    customer_name: str | None
    locale: str
    timezone: str
    amount: int
    currency: str
    invoice_id: str | None
    update_url: str
    attempt: int | None = None
    attempts_left: int | None = None
    next_attempt_at: datetime | None = None
    respond_by: datetime | None = None
    final_action: str | None = None
    renews_at: datetime | None = None
    card_exp_month: int | None = None
    card_exp_year: int | None = None
    access: str | None = None
    unsubscribe_url: str | None = None  # reminders only: required notices have no opt-out
    support_email: str | None = None

    def __post_init__(self) -> None:
        for name in ("next_attempt_at", "respond_by", "renews_at"):
            value = getattr(self, name)
            if value is not None:
                require_aware(name, value)
        zone(self.timezone)


@dataclass(frozen=True, kw_only=True)
class RenderedMessage:
    subject: str  # one line
    text: str
    html: str


# ---- the context of a planned message -------------------------------------------------------


def context_for(
    planned: PlannedMessage,
    *,
    tenant_name: str,
    customer_name: str | None,
    locale: str | None,
    update_url: str,
    unsubscribe_url: str | None,
    sender_name: str | None = None,
    support_email: str | None = None,
) -> MessageContext:
    """The context of `planned` for the tenant's words. `unsubscribe_url` is dropped for a
    required notice whatever the caller gives: only reminders may be opted out of."""
    data = planned.data
    return MessageContext(
        kind=planned.kind,
        tenant_name=tenant_name,
        sender_name=sender_name or tenant_name,
        customer_name=customer_name,
        locale=locale or data.get("locale") or DEFAULT_LOCALE,
        timezone=str(data.get("timezone") or "UTC"),
        amount=int(data.get("amount") or 0),
        currency=str(data.get("currency") or "usd"),
        invoice_id=planned.invoice_id,
        update_url=update_url,
        attempt=data.get("attempt"),
        attempts_left=data.get("attempts_left"),
        next_attempt_at=_instant("next_attempt_at", data.get("next_attempt_at")),
        respond_by=_instant("respond_by", data.get("respond_by")),
        final_action=data.get("final_action"),
        renews_at=_instant("renews_at", data.get("renews_at")),
        card_exp_month=data.get("exp_month"),
        card_exp_year=data.get("exp_year"),
        access=data.get("access"),
        unsubscribe_url=unsubscribe_url if planned.kind.is_reminder else None,
        support_email=support_email,
    )


def _instant(field: str, value: Any) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return require_aware(field, value)
    return parse_instant(field, str(value))


def sample_context(
    kind: MessageKind | str,
    *,
    tenant_name: str = "Acme",
    sender_name: str | None = None,
    customer_name: str | None = "Alex Doe",
    locale: str = DEFAULT_LOCALE,
    timezone: str = "America/New_York",
    amount: int = 1999,
    currency: str = "usd",
    final_action: str = "pause_access",
    update_url: str = "https://app.example/billing/update?token=sample",
    unsubscribe_url: str | None = "https://app.example/billing/unsubscribe?token=sample",
    support_email: str | None = None,
    at: datetime = SAMPLE_AT,
) -> MessageContext:
    """A plausible context for previews: the kind's facts as the lifecycle would give them
    for a failure at `at` (two attempts made of four, the next in three days, …)."""
    kind = parse_kind(kind)
    day = 86_400
    by_kind: dict[MessageKind, dict[str, Any]] = {
        MessageKind.PAYMENT_FAILED: {"attempts_left": 4, "next_attempt_at": _after(at, 1 * day)},
        MessageKind.RETRY_FAILED: {
            "attempt": 2,
            "attempts_left": 2,
            "next_attempt_at": _after(at, 3 * day),
        },
        MessageKind.FINAL_WARNING: {
            "attempt": 3,
            "attempts_left": 1,
            "next_attempt_at": _after(at, 3 * day),
        },
        MessageKind.RECOVERED: {"attempt": 3},
        MessageKind.EXHAUSTED: {"attempt": 4, "attempts_left": 0, "access": "paused"},
        MessageKind.CARD_EXPIRING: {  # a card that ends with this month; renewal next month
            "renews_at": _after(at, 8 * day),
            "card_exp_month": at.month,
            "card_exp_year": at.year,
        },
    }
    facts = by_kind[kind]
    return MessageContext(
        kind=kind,
        tenant_name=tenant_name,
        sender_name=sender_name or tenant_name,
        customer_name=customer_name,
        locale=locale,
        timezone=timezone,
        amount=amount,
        currency=currency,
        invoice_id=None if kind is MessageKind.CARD_EXPIRING else "in_sample_0001",
        update_url=update_url,
        final_action=final_action,
        unsubscribe_url=unsubscribe_url if kind.is_reminder else None,
        support_email=support_email,
        **facts,
    )


def _after(at: datetime, seconds: int) -> datetime:
    return at + timedelta(seconds=seconds)


def parse_kind(value: MessageKind | str, *, field: str = "event") -> MessageKind:
    """The kind named `value`; `InvalidInput` naming `field` and the kinds there are."""
    try:
        return MessageKind(value)
    except ValueError:
        raise InvalidInput(
            field, value, f"expected one of {', '.join(k.value for k in MessageKind)}"
        ) from None


# ---- rendering ------------------------------------------------------------------------------


def render(context: MessageContext, *, templates_dir: Path | None = None) -> RenderedMessage:
    """The subject, text and HTML of `context`, from the tenant's `templates_dir` where it has
    the file and the shipped defaults otherwise. A template that does not render (a syntax
    error, an undefined name) → `InvalidInput` naming the file."""
    import jinja2

    env = _environment(str(templates_dir) if templates_dir is not None else None)
    values = _values(context)
    parts: list[str] = []
    for name in _template_names(context):
        try:
            parts.append(env.get_template(name).render(values))
        except jinja2.TemplateError as exc:
            # A syntax error names its own file (perhaps a layout); an undefined name does not.
            where = getattr(exc, "name", None) or name
            raise InvalidInput(
                "templates", where, f"expected a template that renders: {exc}"
            ) from None
    subject, text, html = parts
    return RenderedMessage(subject=_SPACES.sub(" ", subject).strip(), text=text, html=html)


def _template_names(context: MessageContext) -> tuple[str, str, str]:
    """The subject's, the text part's and the HTML part's file names."""
    kind = context.kind.value
    return f"{kind}.subject.txt", f"{kind}.txt", f"{kind}.html"


@functools.lru_cache(maxsize=64)
def _environment(templates_dir: str | None) -> jinja2.Environment:
    import jinja2

    defaults = jinja2.PackageLoader("recoup.messages", "templates")
    loader: jinja2.BaseLoader = defaults
    if templates_dir is not None:
        if not Path(templates_dir).is_dir():
            raise InvalidInput("templates_dir", templates_dir, "expected a directory")
        loader = jinja2.ChoiceLoader([jinja2.FileSystemLoader(templates_dir), defaults])
    env = jinja2.Environment(
        loader=loader,
        autoescape=jinja2.select_autoescape(
            enabled_extensions=("html",), default_for_string=False, default=False
        ),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        # The shipped templates change only with the package: no stat of each file per email.
        # A tenant's directory is read again when its files change.
        auto_reload=templates_dir is not None,
    )
    return env


def _values(context: MessageContext) -> dict[str, Any]:
    locale = locale_or_default(context.locale)
    tz = zone(context.timezone)

    def money(minor: int, currency: str) -> str:
        return format_money(minor, currency, locale)

    def local_date(instant: datetime | None) -> str | None:
        return None if instant is None else format_local_date(instant, tz, locale)

    def local_datetime(instant: datetime | None) -> str | None:
        return None if instant is None else format_local_datetime(instant, tz, locale)

    words = _FINAL_ACTION_WORDS.get(context.final_action or "", (None, None))
    raw = {f.name: getattr(context, f.name) for f in fields(context)}
    expiry = None
    if context.card_exp_month is not None and context.card_exp_year is not None:
        expiry = f"{context.card_exp_month:02d}/{context.card_exp_year}"
    env_values: dict[str, Any] = {
        **raw,
        "kind": context.kind.value,
        "is_reminder": context.kind.is_reminder,  # may be opted out of; else a required notice
        "amount_minor": context.amount,
        "amount": money(context.amount, context.currency),
        "next_attempt": local_date(context.next_attempt_at),
        "respond_by_date": local_date(context.respond_by),
        "renews_on": local_date(context.renews_at),
        "card_expiry": expiry,
        "final_action_future": words[0],
        "final_action_past": words[1],
        "money": money,
        "local_date": local_date,
        "local_datetime": local_datetime,
    }
    return env_values


def with_locale(context: MessageContext, locale: str) -> MessageContext:
    """`context` in another locale (a preview's `--locale`)."""
    return replace(context, locale=check_locale(locale))


__all__ = [
    "SAMPLE_AT",
    "MessageContext",
    "RenderedMessage",
    "context_for",
    "parse_kind",
    "render",
    "sample_context",
    "with_locale",
]
