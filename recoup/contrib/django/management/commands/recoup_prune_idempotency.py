"""`manage.py recoup_prune_idempotency [--older-than 24h] [--database ALIAS] [--dry-run]`:
delete the idempotency records first used longer ago than `--older-than` (24 hours by default,
Stripe's floor for keeping keys). A delivery of a pruned key runs its view again; the charge
ledger still stops a second charge. Run it daily (cron, a scheduled job)."""

from __future__ import annotations

from argparse import ArgumentParser
from datetime import UTC, datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import DEFAULT_DB_ALIAS, connections

from recoup.contrib.django.durations import format_duration, parse_duration
from recoup.contrib.django.idempotency import IdempotencyRecords
from recoup.contrib.django.models import IdempotencyRecord
from recoup.errors import InvalidInput
from recoup.receiver.idempotency import DEFAULT_RETENTION
from recoup.timekeeping.instants import format_utc


class Command(BaseCommand):
    help = "Delete idempotency records first used longer ago than --older-than (default 24h)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--older-than",
            default=format_duration(DEFAULT_RETENTION),
            help="keep records younger than this: 90s, 15m, 12h, 7d, 1d12h (default %(default)s)",
        )
        parser.add_argument(
            "--database", default=DEFAULT_DB_ALIAS, help="database alias (default %(default)s)"
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="count what would be deleted; delete nothing"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            older_than = parse_duration("--older-than", options["older_than"])
        except InvalidInput as exc:
            raise CommandError(str(exc), returncode=2) from None
        alias = database_alias(options["database"])
        now = datetime.now(UTC)
        before = now - older_than
        if options["dry_run"]:
            count = IdempotencyRecord.objects.using(alias).filter(created_at__lt=before).count()
            verb = "would delete"
        else:
            count = IdempotencyRecords(using=alias).prune(older_than, now=now)
            verb = "deleted"
        noun = "record" if count == 1 else "records"
        self.stdout.write(
            f"{verb} {count} idempotency {noun} first used before {format_utc(before)}"
        )


def database_alias(alias: str) -> str:
    """`alias` if settings.DATABASES has it; a CommandError (exit 2) naming the choices."""
    if alias not in connections:
        choices = ", ".join(sorted(connections))
        raise CommandError(f"--database: {alias!r}: expected one of {choices}", returncode=2)
    return alias
