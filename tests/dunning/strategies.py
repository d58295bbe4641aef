"""Hypothesis strategies for failed charges, shared by the dunning and replay property tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import strategies as st

from recoup.dunning import Failure

# Zones with their holiday country; none moves its clocks inside the 10:00–11:30 window, so the
# local-window property holds exactly. Kiritimati is UTC+14, St John's −03:30, Chatham +12:45.
ZONES: dict[str, str | None] = {
    "America/Chicago": "US",
    "America/New_York": "US",
    "Europe/London": "GB",
    "Europe/Berlin": "DE",
    "Asia/Kolkata": "IN",
    "Asia/Jerusalem": "IL",  # Friday–Saturday weekend
    "Australia/Lord_Howe": "AU",  # 30-minute DST
    "Pacific/Chatham": "NZ",
    "America/St_Johns": "CA",
    "America/Sao_Paulo": "BR",
    "Pacific/Kiritimati": None,
    "UTC": None,
}

SOFT_CODES = ["insufficient_funds", "do_not_honor", "processing_error", "51", "05", "no_such_code"]
HARD_CODES = ["lost_card", "stolen_card", "incorrect_number", "pickup_card", "04", "41", "R1"]
ACTION_CODES = ["expired_card", "authentication_required", "incorrect_cvc", "54", "N7"]
ADVICE = ["", "24", "25", "26", "try_again_later", "40"]

START = datetime(2026, 1, 1, tzinfo=UTC)
SPAN = timedelta(days=700)  # inside the years the holidays package covers


@st.composite
def failures(draw: st.DrawFn, codes: list[str] | None = None) -> Failure:
    """A failed charge anywhere in 2026–2027, in one of `ZONES`, with a decline code from
    `codes` (soft ones by default) and sometimes an advice code."""
    tz = draw(st.sampled_from(sorted(ZONES)))
    seconds = draw(st.integers(0, int(SPAN.total_seconds())))
    advice = draw(st.sampled_from(ADVICE))
    return Failure(
        invoice=draw(st.from_regex(r"inv_[A-Za-z0-9]{1,12}", fullmatch=True)),
        failed_at=START + timedelta(seconds=seconds),
        timezone=tz,
        country=draw(st.sampled_from([ZONES[tz], None])),
        decline_code=draw(st.sampled_from(codes or SOFT_CODES)),
        advice_codes=(advice,) if advice else (),
    )
