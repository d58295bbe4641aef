"""The `[messages]` table of a policy: defaults, every key, and errors naming the field."""

from __future__ import annotations

from datetime import time

import pytest

from recoup.dunning.policy import parse_policy, preset
from recoup.dunning.policy_messages import MessageKind, MessagePolicy
from recoup.errors import ConfigError

GAPS = "gaps = [{ days = 1 }]\n"


def test_without_the_table_every_kind_is_sent_in_the_daytime_window() -> None:
    messages = parse_policy(GAPS).messages
    assert messages == MessagePolicy()
    assert messages.enabled and messages.send == frozenset(MessageKind)
    assert (messages.window_start, messages.window_end) == (time(8), time(20))
    assert messages.card_expiry_days_before == 7 and messages.token_days == 14
    assert preset("business-days").messages == MessagePolicy()


def test_every_key_is_read() -> None:
    messages = parse_policy(
        GAPS
        + """
[messages]
enabled = false
send = ["payment_failed", "exhausted"]
window_start = "09:30"
window_end = "18:00"
card_expiry_days_before = 10
token_days = 30
"""
    ).messages
    assert messages == MessagePolicy(
        enabled=False,
        send=frozenset({MessageKind.PAYMENT_FAILED, MessageKind.EXHAUSTED}),
        window_start=time(9, 30),
        window_end=time(18),
        card_expiry_days_before=10,
        token_days=30,
    )
    assert not messages.sends(MessageKind.PAYMENT_FAILED)  # disabled: nothing at all


@pytest.mark.parametrize(
    ("table", "field"),
    [
        ('window_start = "8:00"', "messages.window_start"),  # two digits
        ('window_start = "24:00"', "messages.window_start"),
        ("window_start = 8", "messages.window_start"),
        ('window_end = "07:00"', "messages.window_end"),  # before the 08:00 start
        ('window_start = "20:00"', "messages.window_end"),  # equal to the 20:00 end
        ('send = ["payment_failed", "sms"]', "messages.send[1]"),
        ('send = "payment_failed"', "messages.send"),
        ('enabled = "yes"', "messages.enabled"),
        ("card_expiry_days_before = 0", "messages.card_expiry_days_before"),
        ("token_days = 365", "messages.token_days"),
        ("colour = 1", "messages.colour"),
    ],
)
def test_a_bad_value_names_its_dotted_field(table: str, field: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_policy(f"{GAPS}[messages]\n{table}\n")
    assert exc.value.field == field


def test_messages_must_be_a_table() -> None:
    with pytest.raises(ConfigError) as exc:
        parse_policy(GAPS + "messages = 1\n")
    assert exc.value.field == "messages"
