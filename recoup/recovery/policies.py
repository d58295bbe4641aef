"""Which policy plans an invoice: the tenant's, or, while it runs a policy experiment, the one
of the invoice's arm.

A tenant's settings hold its policy (arm a) and may hold a second one (arm b) with a share and
an experiment name (`recoup.recovery.store.DunningSettings`). A new invoice's arm is drawn by
`recoup.dunning.experiments.assign_arm` from (tenant, invoice id, experiment name): the same
invoice always gets the same arm, in every process. The invoice records the name of the policy
it was planned with (`Invoice.policy`), so every later transition of it (a re-plan after a card
update, the deadline) follows that same policy, and the recovery report groups by it. An
invoice whose policy is no longer arm b's (the experiment ended or changed) follows arm a.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from recoup.dunning.experiments import assign_arm
from recoup.dunning.policy import DunningPolicy, parse_policy, preset
from recoup.errors import ConfigError, InvalidInput
from recoup.recovery.store import DunningSettings

DEFAULT_POLICY = "business-days"
# The names a policy without `name = …` in its TOML goes by, in each arm.
ARM_A_NAME = "tenant"
ARM_B_NAME = "experiment"


@functools.lru_cache(maxsize=64)
def policy_from_text(text: str | None, default_name: str = ARM_A_NAME) -> DunningPolicy:
    """The policy a settings text holds (None: the default preset); `ConfigError` naming the
    field at fault."""
    return preset(DEFAULT_POLICY) if text is None else parse_policy(text, name=default_name)


@dataclass(frozen=True, kw_only=True)
class TenantPolicies:
    """A tenant's policy (`a`) and, during an experiment, the second one (`b`)."""

    tenant: str
    a: DunningPolicy
    b: DunningPolicy | None = None
    experiment: str | None = None
    share_b: float = 0.0

    def for_new_invoice(self, invoice_id: str) -> DunningPolicy:
        """The policy of the invoice's arm (always `a` without an experiment)."""
        if self.b is None or self.experiment is None:
            return self.a
        arm = assign_arm(self.tenant, invoice_id, self.experiment, self.share_b)
        return self.b if arm == "b" else self.a

    def for_invoice(self, policy_name: str) -> DunningPolicy:
        """The policy an invoice planned with `policy_name` goes on with."""
        if self.b is not None and policy_name == self.b.name:
            return self.b
        return self.a


def tenant_policies(settings: DunningSettings) -> TenantPolicies:
    """The policies of valid settings (as stored, or checked by `check_settings`)."""
    a = policy_from_text(settings.policy_toml)
    if not settings.has_experiment:
        return TenantPolicies(tenant=settings.tenant, a=a)
    assert settings.experiment_share is not None  # has_experiment: all three are set
    return TenantPolicies(
        tenant=settings.tenant,
        a=a,
        b=policy_from_text(settings.experiment_policy_toml, ARM_B_NAME),
        experiment=settings.experiment_name,
        share_b=settings.experiment_share,
    )


def check_settings(settings: DunningSettings) -> TenantPolicies:
    """Both policies of the settings, validated: each must parse (`ConfigError` naming the
    field, under `experiment_policy.` for arm b's) and, during an experiment, the two must
    have distinct names, since an invoice's policy name is what tells its arm."""
    a = policy_from_text(settings.policy_toml)
    if not settings.has_experiment:
        return TenantPolicies(tenant=settings.tenant, a=a)
    try:
        b = policy_from_text(settings.experiment_policy_toml, ARM_B_NAME)
    except ConfigError as exc:
        raise ConfigError(f"experiment_policy.{exc.field}", exc.value, exc.allowed) from None
    if b.name == a.name:
        raise InvalidInput(
            "experiment_policy.name",
            b.name,
            f"expected a name other than the tenant policy's ({a.name!r}): an invoice's policy "
            "name tells which arm it is in",
        )
    return tenant_policies(settings)


__all__ = [
    "ARM_A_NAME",
    "ARM_B_NAME",
    "DEFAULT_POLICY",
    "TenantPolicies",
    "check_settings",
    "policy_from_text",
    "tenant_policies",
]
