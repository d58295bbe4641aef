"""What the demo prints: the `--json` object, and the terminal pages after the recovery report
(double charges, the nightly batch beside Recoup, where to look next)."""

from __future__ import annotations

import os
import shlex
from typing import Any

from rich.console import Console
from rich.table import Table

from recoup.analytics.recovery import report_json
from recoup.demo.learned import learning_json
from recoup.demo.nightly import RETRY_DAYS, BatchFigures
from recoup.demo.run import DemoResult
from recoup.timekeeping.instants import format_utc

DASHBOARD_PORT = 8000
NIGHTLY_NOTE = (
    "the nightly batch is simulated in-process (no HTTP, no injected faults) on the same "
    f"customers and card scenarios: 00:00 UTC on days {', '.join(f'+{d}' for d in RETRY_DAYS)} "
    "after the failure, every decline code alike"
)


def invoked_as(argv0: str, *, executable: str, on_path: str | None) -> str:
    """How to run `recoup` again from where this one was started: as typed
    (`.venv/bin/recoup`), `recoup` only when that name finds this very program on the PATH
    (`on_path`: what the PATH gives for it), and `python -m recoup` (this interpreter) when
    it was run that way."""
    if argv0.endswith("__main__.py") or not argv0:
        return f"{shlex.quote(executable)} -m recoup"
    if on_path is not None and os.path.realpath(on_path) == os.path.realpath(argv0):
        return "recoup"
    return shlex.quote(argv0)


def dashboard_command(result: DemoResult, program: str = "recoup") -> str:
    return f"{program} serve --db {shlex.quote(result.db_url)} --port {DASHBOARD_PORT}"


def demo_json(result: DemoResult, html_path: str) -> dict[str, Any]:
    """The `--json` object: the run's figures (the same for the same seed), then where its
    files are and how long it took (which differ from run to run)."""
    o = result.options
    world = {} if o.world_name is None else {"world": o.world_name}
    return {
        **world,
        "seed": o.seed,
        "size": o.size,
        "policy": o.policy_name,
        "clock": {"start": format_utc(result.started_at), "end": format_utc(result.ended_at)},
        "jobs_run": result.jobs_run,
        "customer_events": result.events,
        "double_charges": result.double_charges.as_json(),
        "report": report_json(result.report),
        "emails": {
            "received": result.emails.received,
            "total": result.emails.total,
            "not_sent": result.emails.not_sent,
            "note": result.emails.note,
        },
        "nightly_comparison": {
            "recoup": _figures(result.recoup),
            "nightly_batch": _figures(result.nightly),
            "note": NIGHTLY_NOTE,
        },
        "files": {
            "db": result.db_url,
            "billing_db": str(result.billing_db),
            "html_report": html_path,
        },
        "dashboard": {
            "command": dashboard_command(result),
            "url": f"http://127.0.0.1:{DASHBOARD_PORT}/",
            "token": result.token,
        },
        "elapsed_seconds": round(result.elapsed_seconds, 2),
        **learning_json(result),  # an adaptive policy's only
    }


def _figures(f: BatchFigures) -> dict[str, Any]:
    return {
        "invoices": f.invoices,
        "recovered_by_retry": f.recovered_by_retry,
        "recovery_rate": round(f.recovery_rate, 4),
        "paid_out_of_band": f.paid_out_of_band,
        "attempts": f.attempts,
        "attempts_on_hard_declines": f.attempts_on_hard_declines,
        "peak_per_minute": f.peak_per_minute,
        "peak_minute": f.peak_minute,
    }


def print_double_charges(result: DemoResult, console: Console) -> None:
    d = result.double_charges
    mark = "[green]0 ✓[/green]" if d.total == 0 else f"[bold red]{d.total} ✗[/bold red]"
    console.print(f"\n[bold]Double charges:[/bold] {mark}")
    console.print(
        f"  gateway: {len(d.gateway_keys)} (invoice, attempt) keys charged twice, "
        f"{len(d.gateway_invoices)} invoices charged twice; receiver's ledger: "
        f"{len(d.ledger_invoices)}; paid another way and charged too: "
        f"{len(d.paid_out_of_band_and_charged)} ({d.money_moved:,} successful charges in all)",
        markup=False,
    )
    if d.total:
        console.print(f"  invoices: {', '.join(d.invoices[:10])}", markup=False)


def print_emails(result: DemoResult, console: Console) -> None:
    """The customers' emails the local SMTP sink received, by kind."""
    e = result.emails
    if e.note is not None:
        console.print(f"\n[bold]Emails to customers:[/bold] {e.note}", highlight=False)
        return
    by_kind = ", ".join(f"{kind} {n:,}" for kind, n in e.received.items()) or "none"
    console.print(
        f"\n[bold]Emails to customers:[/bold] {e.total:,} received by the local SMTP sink",
        highlight=False,
    )
    console.print(f"  by kind: {by_kind}", markup=False, highlight=False)
    if e.not_sent:
        held = ", ".join(f"{why} {n:,}" for why, n in e.not_sent.items())
        console.print(f"  not sent: {held}", markup=False, highlight=False)


def print_comparison(result: DemoResult, console: Console) -> None:
    table = Table(
        title="Recoup against the old nightly batch, same customers", title_justify="left"
    )
    table.add_column("")
    table.add_column(f"Recoup ({result.options.policy_name})", justify="right")
    table.add_column("nightly batch, 00:00 UTC", justify="right")
    for row in comparison_rows(result):
        table.add_row(*row)
    console.print()
    console.print(table)
    console.print(f"  ({NIGHTLY_NOTE})", style="dim", markup=False, highlight=False)


def comparison_columns(result: DemoResult) -> tuple[str, str, str]:
    return ("", f"Recoup ({result.options.policy_name})", "nightly batch, 00:00 UTC")


def comparison_rows(result: DemoResult) -> list[tuple[str, str, str]]:
    """Recoup beside the nightly batch, row by row (the terminal and the HTML report)."""
    r, n = result.recoup, result.nightly
    return [
        ("recovered by a retry", _share(r), _share(n)),
        ("paid another way", f"{r.paid_out_of_band:,}", f"{n.paid_out_of_band:,}"),
        ("charge attempts sent", f"{r.attempts:,}", f"{n.attempts:,}"),
        (
            "attempts on hard declines",
            f"{r.attempts_on_hard_declines:,}",
            f"{n.attempts_on_hard_declines:,}",
        ),
        ("busiest minute at the gateway", _peak(r), _peak(n)),
    ]


WHAT_NEXT = (
    "Open the dashboard (the command the demo printed) and look at an invoice's attempts and a"
    " job's run log.",
    "Point Recoup at your own data: `recoup serve --db sqlite:///recoup.db`, create a tenant"
    " (`recoup tenants create`), and report each failed payment to POST /v1/dunning/failures"
    " with your charge endpoint as charge_url (or connect Stripe: `recoup tenants configure"
    " --charge-with stripe`).",
    "Try a policy on your history first: `recoup replay` plans your past failures through a"
    " policy without charging anyone.",
    "Read docs/getting-started.md for the receiver your charge endpoint uses (signatures,"
    " idempotency keys).",
)


def _share(f: BatchFigures) -> str:
    return f"{f.recovered_by_retry:,} of {f.invoices:,} ({f.recovery_rate:.1%})"


def _peak(f: BatchFigures) -> str:
    return f"{f.peak_per_minute:,}/min" + (f" at {f.peak_minute}" if f.peak_minute else "")


def print_next_steps(
    result: DemoResult, html_path: str, console: Console, *, program: str = "recoup"
) -> None:
    # soft_wrap: a command or a token cut across two lines cannot be pasted.
    console.print(f"\n[bold]HTML report:[/bold] {html_path}", highlight=False, soft_wrap=True)
    console.print("[bold]Dashboard:[/bold]", highlight=False)
    console.print(f"  {dashboard_command(result, program)}", markup=False, highlight=False,
                  soft_wrap=True)  # fmt: skip
    console.print(
        f"  then open http://127.0.0.1:{DASHBOARD_PORT}/ and log in with",
        highlight=False,
        soft_wrap=True,
    )
    console.print(f"  {result.token}", markup=False, highlight=False, soft_wrap=True)
    console.print(
        f"\n{result.options.size:,} failed renewals, {result.jobs_run:,} jobs on the test clock "
        f"({format_utc(result.started_at)} → {format_utc(result.ended_at)}) "
        f"in {result.elapsed_seconds:.1f} s",
        highlight=False,
    )


__all__ = [
    "DASHBOARD_PORT",
    "NIGHTLY_NOTE",
    "WHAT_NEXT",
    "comparison_columns",
    "comparison_rows",
    "dashboard_command",
    "demo_json",
    "invoked_as",
    "print_comparison",
    "print_double_charges",
    "print_emails",
    "print_next_steps",
]
