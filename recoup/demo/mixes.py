"""The proportions the demo's simulated customers are drawn from, as data.

Sources: the decline mix follows Recurly's finding that generic declines, insufficient funds
and temporary holds make up more than 90 % of initial failures, with a few expired cards and
hard declines (recurly.com/blog/research-gives-insights-on-recurring-invoice-recoveries-over-
several-segments; the shares of each code are ours, as no vendor publishes them). Which
declines clear, and when, is a modelling choice, not a measurement: soft declines clear with
time or around paydays, some never; expired cards clear once the card updater or the customer
supplies a new one. The zone and country mix is a plausible international SaaS customer base
(about half in North America, a quarter in Europe). Faults are injected on a few first retries,
to show that ambiguity at the gateway never becomes a double charge.
"""

from __future__ import annotations

from typing import Final

# (IANA zone, ISO country, weight).
ZONES: Final = (
    ("America/New_York", "US", 17),
    ("America/Chicago", "US", 9),
    ("America/Denver", "US", 3),
    ("America/Phoenix", "US", 1),
    ("America/Los_Angeles", "US", 10),
    ("America/Toronto", "CA", 3),
    ("America/Vancouver", "CA", 1),
    ("Europe/London", "GB", 8),
    ("Europe/Berlin", "DE", 6),
    ("Europe/Paris", "FR", 5),
    ("Europe/Amsterdam", "NL", 2),
    ("Europe/Madrid", "ES", 2),
    ("Europe/Rome", "IT", 2),
    ("Europe/Stockholm", "SE", 1),
    ("Europe/Warsaw", "PL", 1),
    ("America/Sao_Paulo", "BR", 4),
    ("America/Mexico_City", "MX", 2),
    ("Asia/Kolkata", "IN", 4),
    ("Asia/Tokyo", "JP", 3),
    ("Asia/Singapore", "SG", 2),
    ("Australia/Sydney", "AU", 4),
    ("Pacific/Auckland", "NZ", 1),
    ("Africa/Johannesburg", "ZA", 1),
    ("Asia/Dubai", "AE", 1),
)

CURRENCY: Final = {
    "US": "usd",
    "CA": "cad",
    "GB": "gbp",
    "DE": "eur",
    "FR": "eur",
    "NL": "eur",
    "ES": "eur",
    "IT": "eur",
    "AU": "aud",
    "NZ": "nzd",
    "BR": "brl",
}  # every other country pays in usd

# The merchant account (Stripe-style `acct_…`) a country's customers are billed through, and
# the gateway of that account. LATAM is a small, newly onboarded account: low volume.
MERCHANT: Final = {
    **dict.fromkeys(("US", "CA"), ("acct_na", "stripe")),
    **dict.fromkeys(("GB", "DE", "FR", "NL", "ES", "IT", "SE", "PL"), ("acct_eu", "adyen")),
    **dict.fromkeys(("JP", "SG", "AU", "NZ", "IN"), ("acct_apac", "stripe")),
    **dict.fromkeys(("BR", "MX"), ("acct_latam", "adyen")),
    **dict.fromkeys(("ZA", "AE"), ("acct_emea", "adyen")),
}

PLANS: Final = ((900, 30), (1900, 30), (4900, 20), (9900, 15), (29900, 5))  # minor units
NETWORKS: Final = (("visa", 55), ("mastercard", 35), ("amex", 10))

# Day of the month the subscription renews: the 1st is the most common anchor.
FIRST_OF_MONTH_WEIGHT: Final = 10  # against 1 for each other day
# The customer's local hour of sign-up, which the renewal keeps (weights by hour 0–23).
SIGNUP_HOURS: Final = (1, 1, 1, 1, 1, 2, 3, 5, 7, 8, 9, 9, 9, 9, 9, 8, 8, 8, 8, 8, 7, 6, 4, 2)

# The failure that opened dunning: (decline code, weight, what the card does next). Outlooks:
#   clears    – a soft decline that clears after a while (`CLEARS_AFTER_HOURS`)
#   payday    – insufficient funds until the next payday (1st or 15th, local), for 2 days
#   never     – declines to the end (a soft decline that never clears)
#   update    – clears once a new card is supplied (`UPDATED_AFTER_HOURS`), if one ever is
#   hard      – never clears, and is never retried
DECLINES: Final = (
    ("insufficient_funds", 44, (("payday", 35), ("clears", 30), ("never", 35))),
    ("generic_decline", 22, (("clears", 45), ("never", 55))),
    ("do_not_honor", 16, (("clears", 45), ("never", 55))),
    ("issuer_not_available", 5, (("clears", 85), ("never", 15))),
    ("processing_error", 4, (("clears", 85), ("never", 15))),
    ("expired_card", 5, (("update", 1),)),
    ("authentication_required", 1, (("update", 1),)),
    ("stolen_card", 1, (("hard", 1),)),
    ("lost_card", 1, (("hard", 1),)),
    ("transaction_not_allowed", 1, (("hard", 1),)),
)
CLEARS_AFTER_HOURS: Final = (6, 240)  # uniform: from six hours to ten days after the failure
# Share of cards that get a new card (card updater or customer), and after how many hours.
UPDATED_SHARE: Final = {"expired_card": 0.7, "authentication_required": 0.4}
UPDATED_AFTER_HOURS: Final = (12, 240)
PAYDAYS: Final = (1, 15)
PAYDAY_WINDOW_DAYS: Final = 2

# Advice codes: Mastercard adds a merchant advice code to some insufficient-funds declines
# (25: retry after 24 hours); a few generic declines say do_not_try_again (never retried).
MASTERCARD_NSF_ADVICE: Final = ("25", 0.2)
DO_NOT_TRY_AGAIN_SHARE: Final = 0.03  # of do_not_honor and generic_decline

# Customers who pay another way (bank transfer, a new invoice) while in dunning, and when.
PAID_OUT_OF_BAND_SHARE: Final = 0.03
PAID_AFTER_HOURS: Final = (24, 288)

# Gateway faults on the first retry's charge: (kind, share of invoices, delay in seconds).
FAULTS: Final = (
    ("timeout_before", 0.02, 0.0),  # the request is lost: nothing charged
    ("timeout_after", 0.02, 0.0),  # charged, but the answer is lost: the ambiguous case
    ("duplicate", 0.02, 0.0),  # delivered twice
    ("slow", 0.01, 0.05),  # answers late (held inside the billing app's SQLite lock)
)

__all__ = [
    "CLEARS_AFTER_HOURS",
    "CURRENCY",
    "DECLINES",
    "DO_NOT_TRY_AGAIN_SHARE",
    "FAULTS",
    "FIRST_OF_MONTH_WEIGHT",
    "MASTERCARD_NSF_ADVICE",
    "MERCHANT",
    "NETWORKS",
    "PAID_AFTER_HOURS",
    "PAID_OUT_OF_BAND_SHARE",
    "PAYDAYS",
    "PAYDAY_WINDOW_DAYS",
    "PLANS",
    "SIGNUP_HOURS",
    "UPDATED_AFTER_HOURS",
    "UPDATED_SHARE",
    "ZONES",
]
