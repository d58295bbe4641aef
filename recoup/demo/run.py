"""`run_demo`: a month of failed renewals recovered through the real path, on a test clock.

1. A fresh SQLite database: a tenant (`demo`) with its signing secret, its policy and an API
   token for the dashboard.
2. The example billing app in a process of its own (`billing_side`), charging a simulated
   gateway that knows every card's scenario and the injected faults (with `scenarios_path`,
   the file's world too: every retry of a soft decline then also has the world's chance at its
   local hour, weekday and day of the month).
3. Every customer event as a job (`driver`): the renewals fail at their instants and are
   reported to Recoup, which plans the retries as jobs; cards are replaced, some invoices are
   paid another way.
4. The test clock moves batch by batch until nothing is left to run: the worker fires each
   attempt at its instant, the attempt POSTs a signed charge request to the billing app over
   loopback, whose receiver charges the gateway at most once; the customers' emails go to a
   local SMTP sink (`mail_sink`), which counts them by kind.
5. The audit (`audit`): double charges counted at the gateway and in the receiver's ledger;
   the recovery report over Recoup's own records; the nightly batch on the same customers
   (computed meanwhile in a third process: it needs nothing of the run).
"""

from __future__ import annotations

import contextlib
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from recoup.analytics.recovery import RecoveryReport, ReportOptions, build_report
from recoup.analytics.recovery.load import SENT
from recoup.demo.audit import DoubleCharges, count_double_charges, read_ledger
from recoup.demo.billing_side import BillingApp
from recoup.demo.driver import CustomerSide, customer_jobs
from recoup.demo.files import DemoFiles
from recoup.demo.mail_sink import MailSink, email_extra_missing
from recoup.demo.nightly import BatchFigures, NightlyProcess
from recoup.demo.population import CLOCK_START, MONTH_DAYS, MONTH_START, Customer, generate
from recoup.dunning.invoice import Invoice
from recoup.dunning.landing import customer_calendar
from recoup.dunning.policy import DunningPolicy, parse_policy
from recoup.dunning.taxonomy import DeclineClass, classify
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.ssrf import SsrfGuard
from recoup.jobs.time_travel import TestClock
from recoup.payments import GatewayClient
from recoup.recovery.email_settings import EmailSettings
from recoup.recovery.email_store import EmailState
from recoup.recovery.records import KEEP
from recoup.recovery.runtime import dunning_runtime
from recoup.recovery.store import InvoiceFilter
from recoup.sealed import Box, secret_box_for
from recoup.storage import Store, open_store
from recoup.tenancy import issue_token, new_tenant
from recoup.timekeeping.clock import VirtualClock

TENANT = "demo"
DAY = timedelta(days=1)
WEEK = timedelta(days=7)
EXTRA_WEEKS = 8  # past the planned end, the clock moves on while jobs remain, this long at most


@dataclass(frozen=True, kw_only=True)
class DemoOptions:
    size: int = 1000  # the CLI's default too (`recoup.cli.demo.DEFAULT_SIZE`)
    seed: int = 7
    policy_name: str  # a preset's name or the file's path, for the output
    policy_toml: str  # the policy's TOML, stored as the tenant's
    db_path: Path  # a fresh SQLite file; the billing app's database and the report go beside
    concurrency: int = 32  # attempts run together in a test clock batch
    scenarios_path: Path | None = None  # a scenario file whose world the customers follow
    world_name: str | None = None  # that world's name, for the output


@dataclass(frozen=True, kw_only=True)
class Progress:
    """Where the clock is: `now`, between `start` and the planned `end` (the clock may go on
    past it while jobs remain), and the jobs run so far."""

    start: datetime
    end: datetime
    now: datetime
    jobs_run: int


@dataclass(frozen=True, kw_only=True)
class AfterRun:
    """What the demo holds once the clock stopped, before the audit (a test's seam)."""

    customers: list[Customer]
    gateway: GatewayClient
    billing_url: str


@dataclass(frozen=True, kw_only=True)
class DemoEmails:
    """The customers' emails: what the SMTP sink received by kind, and the ledger's messages
    not sent by why (suppressed, cancelled: the invoice moved on before their time)."""

    received: dict[str, int]
    not_sent: dict[str, int]
    note: str | None = None  # why none were sent, when the email extra is missing

    @property
    def total(self) -> int:
        return sum(self.received.values())


@dataclass(frozen=True, kw_only=True)
class DemoResult:
    options: DemoOptions
    invoices: list[Invoice]
    report: RecoveryReport
    double_charges: DoubleCharges
    nightly: BatchFigures
    recoup: BatchFigures  # the same figures for Recoup's run
    events: dict[str, int]  # the customers' events, by what came of them
    billing_db: Path
    token: str  # an API token of the tenant, to log in to the dashboard
    started_at: datetime  # virtual: the clock's start and end
    ended_at: datetime
    jobs_run: int
    elapsed_seconds: float
    emails: DemoEmails

    @property
    def db_url(self) -> str:
        return f"sqlite:///{self.options.db_path}"

    @property
    def exit_code(self) -> int:
        """0, or 1 when anything was charged twice."""
        return 0 if self.double_charges.total == 0 else 1


def run_demo(
    options: DemoOptions,
    *,
    on_progress: Callable[[Progress], object] | None = None,
    after_run: Callable[[AfterRun], object] | None = None,
) -> DemoResult:
    """Run the demo (see the module docstring). `on_progress` follows the clock (called from
    the worker's thread, after each batch: keep it quick); `after_run` sees the gateway
    before the audit."""
    began = time.perf_counter()
    world_odds = options.scenarios_path is not None
    customers = generate(options.seed, options.size, world_odds=world_odds)
    nightly = NightlyProcess(seed=options.seed, size=options.size, scenarios=options.scenarios_path)
    try:
        # OFF: a throwaway file, written once by this run; a crash of the machine costs a rerun,
        # never a figure (SQLite still keeps it whole through a crash of the process).
        store = open_store(f"sqlite:///{options.db_path}", synchronous="OFF")
        try:
            run = _run(options, store, customers, on_progress, after_run)
            invoices = _all_invoices(store)
        finally:
            store.close()
        nightly_figures = nightly.result()
    finally:
        nightly.stop()
    paid = [i.invoice_id for i in invoices if i.recovered_by == "paid_out_of_band"]
    doubles = count_double_charges(run.gateway_stats, read_ledger(run.billing_db), paid)
    report = build_report(
        invoices, options=ReportOptions(now=run.ended_at), double_charges=doubles.total
    )
    return DemoResult(
        options=options,
        invoices=invoices,
        report=report,
        double_charges=doubles,
        nightly=nightly_figures,
        recoup=recoup_figures(len(customers), invoices, report),
        events=run.events,
        billing_db=run.billing_db,
        token=run.token,
        started_at=CLOCK_START,
        ended_at=run.ended_at,
        jobs_run=run.jobs_run,
        elapsed_seconds=time.perf_counter() - began,
        emails=run.emails,
    )


@dataclass(frozen=True, kw_only=True)
class _Run:
    """What the run leaves for the audit."""

    token: str
    billing_db: Path
    gateway_stats: dict[str, Any]
    events: dict[str, int]
    ended_at: datetime
    jobs_run: int
    emails: DemoEmails


def _run(
    options: DemoOptions,
    store: Store,
    customers: list[Customer],
    on_progress: Callable[[Progress], object] | None,
    after_run: Callable[[AfterRun], object] | None,
) -> _Run:
    """Steps 1–4 of the module docstring, on `store`; the billing app stops at the end."""
    policy = parse_policy(options.policy_toml, name="tenant")
    clock = VirtualClock(CLOCK_START)
    tenant = store.ensure_tenant(new_tenant(TENANT, now=clock.now(), name="Recoup demo"))
    token = issue_token(store.api_tables(), TENANT, now=clock.now(), label="demo").secret
    files = DemoFiles.beside(options.db_path)
    billing_db = files.billing_db
    app = BillingApp(
        seed=options.seed,
        size=options.size,
        db_path=billing_db,
        secret=tenant.signing_secret,
        log_path=files.billing_log,
        scenarios=options.scenarios_path,
    )
    missing = email_extra_missing()
    with app, contextlib.ExitStack() as stack:
        sink = stack.enter_context(MailSink()) if missing is None else None
        _warm_up(policy, customers)  # while the billing app starts
        app.wait_ready()
        scheduler = Scheduler(store, clock=clock, ssrf=SsrfGuard(allow_private=True))
        box = secret_box_for(str(options.db_path), os.environ)
        dunning, handlers = dunning_runtime(scheduler, store, box=box)
        if sink is not None:
            _send_emails_to(sink, store, box, clock)
        side = CustomerSide(
            dunning=dunning, tenant=TENANT, billing_url=app.url, customers=customers
        )
        side.register(handlers)
        charge_path = httpx.get(app.url, timeout=10).json()["charge_path"]
        dunning.configure(TENANT, policy_toml=options.policy_toml, charge_url=app.url + charge_path)
        scheduler.enqueue_many(customer_jobs(TENANT, customers))
        worker = scheduler.worker(
            handlers=handlers, concurrency=options.concurrency, rng=random.Random(options.seed)
        )
        test_clock = TestClock(
            clock,
            worker,
            store,
            before_step=DailyResync(dunning.resync, clock),
            handler_threads=1,  # a SQLite file: see TestClock
        )
        end = MONTH_START + (MONTH_DAYS + policy.max_duration_days + 2) * DAY
        try:
            jobs_run = _advance(test_clock, store, end, on_progress)
        finally:
            side.close()
        with GatewayClient(f"{app.url}/gateway") as gateway:
            if after_run is not None:
                after_run(AfterRun(customers=customers, gateway=gateway, billing_url=app.url))
            stats = gateway.stats()
        emails = _emails(sink, store, missing)
    return _Run(
        token=token,
        billing_db=billing_db,
        gateway_stats=stats,
        events=dict(sorted(side.counts.items())),
        ended_at=clock.now(),
        jobs_run=jobs_run,
        emails=emails,
    )


DEMO_SENDER = "Recoup demo billing <billing@demo.example>"
DEMO_UPDATE_URL = "https://billing.demo.example/update-card?token={token}"  # never visited


def _send_emails_to(sink: MailSink, store: Store, box: Box, clock: VirtualClock) -> None:
    """The tenant's email settings: every email to the sink."""
    settings = EmailSettings(store.messages, box, now=clock.now)
    settings.save(
        settings.settled(
            TENANT,
            smtp_url=sink.url,
            email_from=DEMO_SENDER,
            reply_to=KEEP,
            update_card_url=DEMO_UPDATE_URL,
            templates_dir=KEEP,
            allow_unsubscribe=True,
        )
    )


def _emails(sink: MailSink | None, store: Store, missing: str | None) -> DemoEmails:
    if sink is None:
        note = f"no email sent: {missing} is not installed (pip install 'recoup[email]')"
        return DemoEmails(received={}, not_sent={}, note=note)
    not_sent: dict[str, int] = {}
    for (_, state), count in store.messages.email_counts(TENANT).items():
        if state is not EmailState.SENT:
            not_sent[state.value] = not_sent.get(state.value, 0) + count
    received = sink.stop()  # every email the worker sent is in by now
    return DemoEmails(
        received=dict(sorted(received.items())), not_sent=dict(sorted(not_sent.items()))
    )


class DailyResync:
    """`Dunning.resync` before a batch, once per virtual day. It redoes what a crash between a
    transition and its jobs left undone, reading every scheduled attempt to find it: before
    each of a month's batches that adds up, and nothing crashes in here."""

    def __init__(self, resync: Callable[[], object], clock: VirtualClock) -> None:
        self.resync = resync
        self.clock = clock
        self.day: date | None = None

    def __call__(self) -> None:
        day = self.clock.now().date()
        if day != self.day:
            self.day = day
            self.resync()


def _advance(
    test_clock: TestClock,
    store: Store,
    end: datetime,
    on_progress: Callable[[Progress], object] | None,
) -> int:
    """Move the clock to `end`, then a week at a time while jobs remain (a late card update
    has its prompt retry); the jobs run."""
    clock = test_clock.clock
    done = 0

    def moved(ran: int) -> None:
        if on_progress is not None:
            at = Progress(start=CLOCK_START, end=end, now=clock.now(), jobs_run=done + ran)
            on_progress(at)

    done += test_clock.advance_to(end, on_batch=moved)
    for _ in range(EXTRA_WEEKS):
        if store.next_due_at() is None:
            break
        done += test_clock.advance_to(clock.now() + WEEK, on_batch=moved)
    return done


def _warm_up(policy: DunningPolicy, customers: list[Customer]) -> None:
    """Load each country's holiday calendar (its first use imports the `holidays` package's
    countries, a second or two) before the clock starts."""
    for country in sorted({c.country for c in customers}):
        customer_calendar(policy, country)


def _all_invoices(store: Store) -> list[Invoice]:
    found: list[Invoice] = []
    cursor: str | None = None
    while True:
        page = store.list_invoices(InvoiceFilter(tenant=TENANT, limit=1000, cursor=cursor))
        found += page.invoices
        if page.next_cursor is None:
            return found
        cursor = page.next_cursor


def recoup_figures(customers: int, invoices: list[Invoice], report: RecoveryReport) -> BatchFigures:
    """Recoup's run in the nightly batch's terms."""
    by_retry = sum(1 for i in invoices if (i.recovered_by or "").startswith("attempt"))
    paid = sum(1 for i in invoices if i.recovered_by == "paid_out_of_band")
    hard = sum(
        1
        for i in invoices
        if classify(i.decline_code or "", _advice(i)).decline_class is DeclineClass.NEVER
        for a in i.attempts
        if a.state in SENT
    )
    return BatchFigures(
        invoices=customers,
        recovered_by_retry=by_retry,
        paid_out_of_band=paid,
        attempts=report.load.attempts,
        attempts_on_hard_declines=hard,
        peak_per_minute=report.load.peak_per_minute,
        peak_minute=report.load.peak_minute,
    )


def _advice(invoice: Invoice) -> tuple[str, ...]:
    return (invoice.advice_code,) if invoice.advice_code else ()


__all__ = [
    "TENANT",
    "AfterRun",
    "DemoEmails",
    "DemoOptions",
    "DemoResult",
    "Progress",
    "run_demo",
]
