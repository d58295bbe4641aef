"""The decline taxonomy: decline and advice codes → what the planner may do.

The table is data (`recoup/dunning/data/declines.toml`, with its sources and the version of the
Visa category list it follows); this module loads it once and answers one question,
`classify(decline_code, advice_codes)`.

Lookup rules:

- a decline code is looked up as a Stripe `decline_code`, then as an ISO 8583 response code
  (`51`, `N7`), then as a Visa category written `visa:1` … `visa:4`;
- an advice code is a Stripe `advice_code` or a Mastercard merchant advice code (`25`, `mac:25`);
- an advice code overrides the decline code when it is stricter (never > customer_action >
  soft): `do_not_try_again` or MAC 03/21 turn an `insufficient_funds` into `never`, but a milder
  advice never lifts a hard decline (a lost card stays lost). The longest "not before" delay of
  the codes applies (MAC 24–30). An informational advice code (class `not_applicable`, e.g.
  MAC 40) overrides nothing;
- an unknown decline code is `soft`, capped at `[unknown].max_attempts` retries, and reported;
  an unknown advice code is reported and ignored.
"""

from __future__ import annotations

import enum
import functools
import tomllib
from dataclasses import dataclass
from importlib import resources
from typing import Any

from recoup.errors import ConfigError


class DeclineClass(enum.Enum):
    """What a decline allows; the value is the string used in data files and output."""

    NEVER = "never"
    CUSTOMER_ACTION = "customer_action"
    SOFT = "soft"
    NOT_APPLICABLE = "not_applicable"


# Severity order for advice codes: a more severe advice wins over a milder one.
_SEVERITY = {
    DeclineClass.SOFT: 0,
    DeclineClass.CUSTOMER_ACTION: 1,
    DeclineClass.NEVER: 2,
    DeclineClass.NOT_APPLICABLE: 2,  # no retry either way
}

_TABLES = ("stripe_decline", "iso8583", "visa_category", "stripe_advice", "mastercard_mac")
_ENTRY_KEYS = frozenset({"class", "iso", "visa", "max_attempts", "min_delay_hours", "basis"})


@dataclass(frozen=True, kw_only=True)
class Entry:
    """One row of the taxonomy."""

    code: str
    table: str
    decline_class: DeclineClass
    iso: str | None = None
    visa_category: int | None = None
    max_attempts: int | None = None
    min_delay_hours: int = 0
    basis: str = ""


@dataclass(frozen=True, kw_only=True)
class Classification:
    """The verdict for one failure's codes.

    `max_attempts` is a cap below the policy's count (None: no cap); `min_delay_hours` is the
    least time between a failure and the retry that follows it; `visa_category` counts toward
    the Visa reattempt limit; `unknown` lists codes the taxonomy does not know; `reason` is a
    one-line explanation for people.
    """

    decline_class: DeclineClass
    reason: str
    max_attempts: int | None = None
    min_delay_hours: int = 0
    visa_category: int | None = None
    unknown: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Taxonomy:
    """The loaded table: entries by table and code, the Visa list version, the unknown rule."""

    version: str
    visa_category_list: str
    visa_limited_categories: frozenset[int]
    sources: tuple[str, ...]
    unknown_max_attempts: int
    unknown_visa_category: int
    entries: dict[str, dict[str, Entry]]

    def lookup(self, table: str, code: str) -> Entry | None:
        return self.entries[table].get(code)


def _entry(table: str, code: str, raw: Any) -> Entry:
    where = f"{table}.{code}"
    if not isinstance(raw, dict):
        raise ConfigError(where, raw, 'expected a table such as { class = "soft" }')
    extra = set(raw) - _ENTRY_KEYS
    if extra:
        raise ConfigError(
            f"{where}.{sorted(extra)[0]}", "…", f"expected keys {sorted(_ENTRY_KEYS)}"
        )
    try:
        decline_class = DeclineClass(raw.get("class"))
    except ValueError:
        raise ConfigError(
            f"{where}.class", raw.get("class"), f"expected one of {[c.value for c in DeclineClass]}"
        ) from None
    return Entry(
        code=code,
        table=table,
        decline_class=decline_class,
        iso=raw.get("iso"),
        visa_category=raw.get("visa"),
        max_attempts=raw.get("max_attempts"),
        min_delay_hours=int(raw.get("min_delay_hours", 0)),
        basis=str(raw.get("basis", "")),
    )


def parse_taxonomy(text: str) -> Taxonomy:
    """Build a taxonomy from TOML text in the shape of the shipped `declines.toml`."""
    data = tomllib.loads(text)
    meta = data.get("meta", {})
    unknown = data.get("unknown", {})
    entries: dict[str, dict[str, Entry]] = {}
    for table in _TABLES:
        rows = data.get(table, {})
        entries[table] = {code: _entry(table, code, raw) for code, raw in rows.items()}
    return Taxonomy(
        version=str(meta.get("version", "")),
        visa_category_list=str(meta.get("visa_category_list", "")),
        visa_limited_categories=frozenset(meta.get("visa_limited_categories", [2, 3, 4])),
        sources=tuple(meta.get("sources", ())),
        unknown_max_attempts=int(unknown.get("max_attempts", 2)),
        unknown_visa_category=int(unknown.get("visa", 4)),
        entries=entries,
    )


@functools.cache
def default_taxonomy() -> Taxonomy:
    """The taxonomy shipped with Recoup (read once from package data)."""
    text = resources.files("recoup.dunning").joinpath("data/declines.toml").read_text("utf-8")
    return parse_taxonomy(text)


def _decline_entry(taxonomy: Taxonomy, code: str) -> Entry | None:
    lowered = code.strip().lower()
    if lowered.startswith("visa:"):
        return taxonomy.lookup("visa_category", lowered.removeprefix("visa:"))
    return taxonomy.lookup("stripe_decline", lowered) or taxonomy.lookup(
        "iso8583", code.strip().upper()
    )


def _advice_entry(taxonomy: Taxonomy, code: str) -> Entry | None:
    lowered = code.strip().lower()
    found = taxonomy.lookup("stripe_advice", lowered)
    if found is not None:
        return found
    digits = lowered.removeprefix("mac:").removeprefix("mac")
    if digits.isdigit() and len(digits) <= 2:
        return taxonomy.lookup("mastercard_mac", digits.zfill(2))
    return None


def _visa_category(taxonomy: Taxonomy, entry: Entry | None) -> int:
    if entry is None:
        return taxonomy.unknown_visa_category
    if entry.table == "visa_category":
        return int(entry.code)
    if entry.visa_category is not None:
        return entry.visa_category
    if entry.iso is not None:
        iso = taxonomy.lookup("iso8583", entry.iso)
        if iso is not None and iso.visa_category is not None:
            return iso.visa_category
    return taxonomy.unknown_visa_category


def _describe(entry: Entry) -> str:
    label = {
        "stripe_decline": "decline code",
        "iso8583": "ISO 8583 code",
        "visa_category": "Visa category",
        "stripe_advice": "advice code",
        "mastercard_mac": "Mastercard MAC",
    }[entry.table]
    return f"{label} {entry.code}"


def classify(
    decline_code: str | None,
    advice_codes: tuple[str, ...] = (),
    *,
    taxonomy: Taxonomy | None = None,
) -> Classification:
    """Classify one failure's decline code and advice codes (rules in the module docstring)."""
    table = taxonomy or default_taxonomy()
    unknown: list[str] = []
    code = (decline_code or "").strip()
    entry = _decline_entry(table, code) if code else None
    max_attempts: int | None = None
    min_delay = 0
    if entry is not None:
        decline_class = entry.decline_class
        max_attempts = entry.max_attempts
        min_delay = entry.min_delay_hours
        reason = f"{_describe(entry)}: {decline_class.value}"
    elif code:
        unknown.append(code)
        decline_class = DeclineClass.SOFT
        max_attempts = table.unknown_max_attempts
        reason = f"unknown decline code {code!r}: soft, capped at {max_attempts} retries"
    else:
        decline_class = DeclineClass.SOFT
        reason = "no decline code: soft"

    overriding: Entry | None = None
    unknown_advice: list[str] = []
    delay_source = _describe(entry) if entry is not None else ""
    for advice in advice_codes:
        if not advice.strip():
            continue
        found = _advice_entry(table, advice)
        if found is None:
            unknown_advice.append(advice.strip())
            continue
        if found.min_delay_hours > min_delay:
            min_delay, delay_source = found.min_delay_hours, _describe(found)
        if found.decline_class is DeclineClass.NOT_APPLICABLE:
            continue  # informational (e.g. MAC 40, prepaid card): overrides nothing
        strictest = overriding.decline_class if overriding else decline_class
        if _SEVERITY[found.decline_class] > _SEVERITY[strictest]:
            overriding = found
    if overriding is not None:
        reason += f"; {_describe(overriding)} overrides: {overriding.decline_class.value}"
        decline_class = overriding.decline_class
    if min_delay:
        reason += f"; {delay_source}: not before {min_delay} h"
    if unknown_advice:
        reason += f"; unknown advice {', '.join(repr(u) for u in unknown_advice)} ignored"
    unknown.extend(unknown_advice)
    return Classification(
        decline_class=decline_class,
        reason=reason,
        max_attempts=max_attempts,
        min_delay_hours=min_delay,
        visa_category=_visa_category(table, entry) if code else None,
        unknown=tuple(unknown),
    )


__all__ = [
    "Classification",
    "DeclineClass",
    "Entry",
    "Taxonomy",
    "classify",
    "default_taxonomy",
    "parse_taxonomy",
]
