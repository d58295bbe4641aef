"""The recovery report of a tenant, read from its store: the I/O shell around the pure
`recoup.analytics.recovery.build_report`, shared by the API and the CLI, and the merchant
tags an operator puts on merchant ids.

What a report reads: the invoices whose failure is in [since, until) with their attempts
(`DunningStore.report_invoices`, two statements however many), the tenant's merchant tags, the
`invoice.double_charged` events in that window, and, while the tenant runs a policy experiment,
the names of its two policies, which the report compares. `evaluate` estimates a candidate
policy's recovery from the window's logged timing decisions (off-policy). `now` (what is
still running, where the judging windows end) is the caller's clock. `until` defaults to
`now`, `since` to as far back as the report's judgements look (`lookback`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from recoup.analytics.policy_evaluation import Evaluation, evaluate_policy
from recoup.analytics.recovery import (
    AttemptLogEntry,
    MerchantTag,
    RecoveryReport,
    ReportOptions,
    ReviewItem,
    attempt_log,
    build_report,
)
from recoup.dunning.adaptive_counts import LearnerState
from recoup.dunning.policy import DunningPolicy
from recoup.errors import InvalidInput
from recoup.recovery.figures import money_by_currency
from recoup.recovery.learning import TenantLearners, tenant_seed
from recoup.recovery.policies import tenant_policies
from recoup.recovery.store import DunningStore
from recoup.timekeeping.clock import Clock
from recoup.timekeeping.instants import require_aware

DOUBLE_CHARGED = "invoice.double_charged"


def lookback(options: ReportOptions) -> timedelta:
    """How far back the report's judgements reach from `options.now`: a low-volume merchant's
    window and the baseline windows of the same length before it."""
    return timedelta(days=options.low_volume_window_days * (options.baseline_windows + 1))


@dataclass(frozen=True, kw_only=True)
class ReportWindow:
    """The invoices a report covers (failed in [since, until)) and its `now`."""

    since: datetime
    until: datetime
    now: datetime


@dataclass(frozen=True)
class Reports:
    """Recovery reports and merchant tags of every tenant of `store`, on `clock`."""

    store: DunningStore
    clock: Clock

    def window(
        self,
        options: ReportOptions,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> ReportWindow:
        """The window of a report: `until` defaults to now (or to `since` when that is later),
        `since` to `lookback` before it.
        `InvalidInput` naming `until` when it is before `since`."""
        now = options.now
        start_given = None if since is None else require_aware("since", since)
        if until is not None:
            end = require_aware("until", until)
        else:
            # A `since` ahead of now with no `until` asks for an empty window, not an error.
            end = now if start_given is None else max(now, start_given)
        start = end - lookback(options) if start_given is None else start_given
        if end < start:
            raise InvalidInput("until", end.isoformat(), f"expected at or after since ({start})")
        return ReportWindow(since=start, until=end, now=now)

    def options(
        self, tenant: str, *, min_volume: int | None = None, now: datetime | None = None
    ) -> ReportOptions:
        """The report's options: the clock's now (unless given), the minimum volume (None: the
        report's default), and the tenant's experiment, if it runs one (its two policies are
        compared by name)."""
        settings = self.store.get_settings(tenant)
        experiment = None
        if settings is not None and settings.has_experiment:
            policies = tenant_policies(settings)
            assert policies.b is not None  # has_experiment
            experiment = (policies.a.name, policies.b.name)
        options = ReportOptions(
            now=self.clock.now() if now is None else require_aware("now", now),
            experiment=experiment,
        )
        return options if min_volume is None else replace(options, min_volume=min_volume)

    def build(
        self,
        tenant: str,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        min_volume: int | None = None,
        now: datetime | None = None,
    ) -> tuple[RecoveryReport, ReportWindow]:
        """The tenant's recovery report over the window (see the module docstring)."""
        options = self.options(tenant, min_volume=min_volume, now=now)
        window = self.window(options, since=since, until=until)
        invoices = self.store.report_invoices(tenant, since=window.since, until=window.until)
        double_charges = self.store.count_events(
            tenant, DOUBLE_CHARGED, since=window.since, until=window.until
        )
        report = build_report(
            invoices,
            options=options,
            tags=self.store.merchant_tags(tenant),
            double_charges=double_charges,
        )
        return report, window

    def money(self, tenant: str, window: ReportWindow) -> dict[str, dict[str, int]]:
        """The amounts of the tenant's invoices that failed in the window, as currency → kind
        (recovered, at_risk, lost, stopped) → minor units (`figures.money_by_currency`)."""
        figures = self.store.dunning_amounts(tenant, since=window.since, until=window.until)
        return money_by_currency(figures)

    def attempt_log(self, tenant: str, window: ReportWindow) -> list[AttemptLogEntry]:
        """Every attempt of the tenant's invoices that failed in the window, with its inputs."""
        return attempt_log(
            self.store.report_invoices(tenant, since=window.since, until=window.until)
        )

    def evaluate(self, tenant: str, candidate: DunningPolicy, window: ReportWindow) -> Evaluation:
        """A candidate policy's recovery estimated from the logged decisions of the invoices
        that failed in the window (`analytics.policy_evaluation`); an adaptive candidate
        decides from the tenant's learner state and seed, as the runtime would now."""
        invoices = self.store.report_invoices(tenant, since=window.since, until=window.until)
        settings = candidate.adaptive
        state = (
            TenantLearners(self.store).state(tenant, settings.band_minutes)
            if settings is not None
            else LearnerState()
        )
        return evaluate_policy(invoices, candidate, state=state, seed=tenant_seed(tenant))

    def review_queue(
        self, tenant: str, *, min_volume: int | None = None, now: datetime | None = None
    ) -> tuple[list[ReviewItem], list[ReviewItem], ReportWindow]:
        """(the flagged low-volume merchant ids, those a tag suppresses, the window judged)."""
        report, window = self.build(tenant, min_volume=min_volume, now=now)
        return report.review_queue, report.suppressed, window

    # Merchant tags

    def tag(self, tenant: str, merchant_id: str, tag: str, note: str = "") -> MerchantTag:
        """Tag a merchant id now (replacing its tag); `InvalidInput` naming a bad field."""
        made = MerchantTag(merchant_id=merchant_id, tag=tag, note=note, tagged_at=self.clock.now())
        return self.store.put_merchant_tag(tenant, made)

    def untag(self, tenant: str, merchant_id: str) -> bool:
        """Remove the merchant id's tag → whether it had one."""
        return self.store.delete_merchant_tag(tenant, merchant_id)

    def tags(self, tenant: str) -> list[MerchantTag]:
        return self.store.merchant_tags(tenant)


__all__ = ["DOUBLE_CHARGED", "ReportWindow", "Reports", "lookback"]
