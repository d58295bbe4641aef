"""An attempt's learned-timing decision in the dunning store, on each backend (migration 0016):
written with its attempt and read back whole, changed with it, never half-written (the schema
refuses an arm without its propensity or explanation), and the learner's reading of a
tenant's answered attempts from an instant on."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from recoup.dunning.attempt_timing import AttemptTiming
from recoup.dunning.invoice import AttemptState
from recoup.recovery.store import InvoiceChange
from tests.storage.conftest import Backend, Store
from tests.storage.test_dunning_store import DAY, T0, TENANT, attempt, invoice

TIMING = AttemptTiming(
    arm="adaptive",
    slot="Thursday 18:00–19:00 (a payday)",
    static_slot="Wednesday 10:00–11:00 (other days of the month)",
    propensity=0.8125,
    explanation="Thursday 18:00–19:00 (a payday): 31% ± 4% (…), against 22% for the static slot",
    figures={
        "estimate": 0.3141592653589793,
        "static_estimate": 0.22,
        "explored": False,
        "slot": {"band_start": 1080, "band_minutes": 60, "weekday": 3, "dom_class": "payday"},
    },
)


def test_a_decision_is_stored_with_its_attempt_and_read_back_whole(store: Store) -> None:
    timed = replace(attempt("inv_1", 1), timing=TIMING)
    stored, created = store.create_invoice(
        invoice(attempts=(timed, attempt("inv_1", 2))), events=()
    )
    assert created
    found = store.get_invoice(TENANT, "inv_1")
    assert found is not None and found == stored
    assert found.attempts[0].timing == TIMING and found.attempts[1].timing is None
    # A transition that answers the attempt keeps its decision.
    answered = replace(
        found.attempts[0], state=AttemptState.SUCCEEDED, reported_at=T0 + DAY + timedelta(hours=1)
    )
    store.change_invoice(
        TENANT,
        "inv_1",
        lambda inv: InvoiceChange(
            invoice=replace(inv, attempts=(answered, inv.attempts[1]), version=inv.version + 1),
            events=(),
        ),
    )
    again = store.get_invoice(TENANT, "inv_1")
    assert again is not None and again.attempts[0] == answered
    # The learner reads the tenant's answered attempts from an instant on, with the invoice's
    # context.
    (read,) = store.learner_attempts(TENANT, since=T0)
    assert read.attempt == answered and read.invoice_id == "inv_1"
    assert (read.timezone, read.country, read.decline_code, read.card_network) == (
        "Europe/Paris",
        "FR",
        "insufficient_funds",
        "visa",
    )
    assert store.learner_attempts(TENANT, since=T0 + 2 * DAY) == []
    assert store.learner_attempts("another", since=T0) == []


@pytest.mark.parametrize(
    "broken",
    [
        "timing_arm = 'adaptive'",  # an arm without the rest of its decision
        "timing_propensity = 0.5",
        "timing_arm = 'clever', timing_slot = 's', timing_static_slot = 's', "
        "timing_propensity = 0.5, timing_explanation = 'e', timing_figures = '{}'",
        "timing_arm = 'adaptive', timing_slot = 's', timing_static_slot = 's', "
        "timing_propensity = 0, timing_explanation = 'e', timing_figures = '{}'",
    ],
)
def test_the_schema_refuses_a_half_written_or_impossible_decision(
    backend: Backend, store: Store, broken: str
) -> None:
    store.create_invoice(invoice(attempts=(attempt("inv_1", 1),)), events=())
    with pytest.raises(Exception, match=r"(?i)check|constraint"):
        backend.execute(f"UPDATE invoice_attempts SET {broken} WHERE invoice_id = 'inv_1'")
    found = store.get_invoice(TENANT, "inv_1")
    assert found is not None and found.attempts[0].timing is None
