"""The words of a customer email: a `MessageContext` rendered by Jinja2 templates into a
subject, a text part and an HTML part, then composed into a MIME message.

Templates: `recoup/messages/templates/` ships the defaults, three files per kind
(`{kind}.subject.txt`, `{kind}.txt`, `{kind}.html`) over two layouts (`_layout.txt`,
`_layout.html`). A tenant's `templates_dir` overrides any of them by name and falls back to
the defaults for the rest. HTML is autoescaped, text is not; an undefined name is an error
(StrictUndefined), so a typo in a tenant's template fails its preview rather than sending a
blank. What a template sees is `MessageContext`'s fields plus, formatted with babel in the
customer's locale and zone: `amount` ("$19.99", "19,99 €"; the minor units are
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
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from email.utils import format_datetime, formataddr, parseaddr
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recoup.errors import InvalidInput
from recoup.messages.kinds import MessageKind
from recoup.messages.mime import Composed, compose_mime
from recoup.messages.planning import PlannedMessage
from recoup.timekeeping.instants import parse_instant, require_aware
from recoup.timekeeping.zones import zone

if TYPE_CHECKING:
    import jinja2
    from babel import Locale

DEFAULT_LOCALE = "en"
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


def check_locale(value: str, *, field: str = "locale") -> str:
    """`value` if babel knows it as a locale ("en", "fr_FR", "pt-BR"); else `InvalidInput`."""
    _locale(value, field=field)
    return value


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
    locale = _locale_or_default(context.locale)
    tz = zone(context.timezone)

    def money(minor: int, currency: str) -> str:
        return format_money(minor, currency, locale)

    def local_date(instant: datetime | None) -> str | None:
        if instant is None:
            return None
        from babel.dates import format_date

        return format_date(instant.astimezone(tz).date(), format="full", locale=locale)

    def local_datetime(instant: datetime | None) -> str | None:
        if instant is None:
            return None
        from babel.dates import format_datetime as babel_datetime

        return babel_datetime(instant, format="long", tzinfo=tz, locale=locale)

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


def format_money(minor: int, currency: str, locale: str | Locale) -> str:
    """`minor` units of `currency` as the locale writes money: 1999 usd → "$19.99" (en),
    "19,99 $US" (fr); 1999 jpy → "¥1,999" (JPY has no minor unit)."""
    from babel.numbers import format_currency, get_currency_precision

    code = currency.upper()
    value = Decimal(minor).scaleb(-get_currency_precision(code))
    loc = locale if not isinstance(locale, str) else _locale_or_default(locale)
    return format_currency(value, code, locale=loc)


def _locale(value: str, *, field: str) -> Locale:
    from babel import Locale, UnknownLocaleError

    try:
        return Locale.parse(value.replace("-", "_"))
    except (UnknownLocaleError, ValueError, TypeError, AttributeError):
        raise InvalidInput(
            field, value, 'expected a locale babel knows, such as "en", "fr_FR" or "pt-BR"'
        ) from None


def _locale_or_default(value: str) -> Locale:
    """The customer's locale, or English: an unknown locale from a customer's record must not
    stop the email that tells them their payment failed."""
    try:
        return _locale(value, field="locale")
    except InvalidInput:
        return _locale(DEFAULT_LOCALE, field="locale")


# ---- composing ------------------------------------------------------------------------------


def message_id_for(key: str, sender: str) -> str:
    """`<{key}@{sender's domain}>`: the Message-ID of the email keyed `key`, the same at every
    try, so a resend after a crash is recognisably the same message."""
    domain = parseaddr(sender)[1].rpartition("@")[2] or "recoup.invalid"
    return f"<{key}@{domain}>"


def compose(
    rendered: RenderedMessage,
    *,
    to: str,
    sender: str,
    reply_to: str | None,
    message_id: str,
    list_unsubscribe: str | None,
    date: datetime,
    extra_headers: Sequence[tuple[str, str]] = (),
) -> Composed:
    """A multipart/alternative email (text, then HTML) with the caller's `message_id` (given
    with or without its angle brackets), ready for SMTP (`messages.mime`). `list_unsubscribe`
    (an https URL) adds `List-Unsubscribe` and RFC 8058's one-click `List-Unsubscribe-Post`;
    without it neither. `extra_headers` (ASCII names and values) come last, as given."""
    require_aware("date", date)
    to_header, recipient = _address("to", to)
    from_header, envelope_sender = _address("sender", sender)
    mid = message_id if message_id.startswith("<") else f"<{message_id}>"
    headers = [("Subject", rendered.subject), ("From", from_header), ("To", to_header)]
    if reply_to:
        headers.append(("Reply-To", _address("reply_to", reply_to)[0]))
    headers += [
        ("Date", format_datetime(date.astimezone(UTC))),
        ("Message-ID", mid),
        # RFC 3834: an automatic message, so auto-responders do not answer it.
        ("Auto-Submitted", "auto-generated"),
    ]
    if list_unsubscribe:
        url = list_unsubscribe.strip("<>")
        headers += [
            ("List-Unsubscribe", f"<{url}>"),
            ("List-Unsubscribe-Post", "List-Unsubscribe=One-Click"),
        ]
    for name, value in [*headers, *extra_headers]:
        if any(c in value for c in "\r\n"):
            raise InvalidInput(name.lower(), value, "expected a header value on one line")
    return compose_mime(
        [*headers, *extra_headers],
        text=rendered.text,
        html=rendered.html,
        sender=envelope_sender,
        recipient=recipient,
        message_id=mid,
    )


def _address(field: str, value: str) -> tuple[str, str]:
    """The header form of one mailbox (its name quoted, or in RFC 2047 words when not ASCII)
    and its bare address; `InvalidInput(field, …)` for anything but one ASCII address."""
    name, addr = parseaddr(value)
    if "@" not in addr or not addr.isascii() or any(c in value for c in "\r\n"):
        raise InvalidInput(
            field, value, 'expected an address such as "Acme <billing@acme.example>"'
        )
    return formataddr((name, addr), charset="utf-8"), addr


def with_locale(context: MessageContext, locale: str) -> MessageContext:
    """`context` in another locale (a preview's `--locale`)."""
    return replace(context, locale=check_locale(locale))


__all__ = [
    "DEFAULT_LOCALE",
    "SAMPLE_AT",
    "MessageContext",
    "RenderedMessage",
    "check_locale",
    "compose",
    "context_for",
    "format_money",
    "message_id_for",
    "parse_kind",
    "render",
    "sample_context",
    "with_locale",
]
