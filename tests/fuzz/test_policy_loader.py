"""Fuzzing the dunning policy loader: any TOML document shaped like a policy, any text, and a
policy file of any bytes is a policy or an `InvalidInput` (a `ConfigError` naming the field);
never a traceback. A policy that loads plans a failure without error, since the runtime goes
on to do that."""

from __future__ import annotations

import contextlib
import io
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recoup.cli import main
from recoup.cli._policy import load_policy
from recoup.dunning import Failure, parse_policy, plan_retries
from recoup.dunning.policy import preset_text
from recoup.errors import InvalidInput
from tests.fuzz.strategies import policy_documents

PLAN = ["plan", "--invoice", "inv_1", "--failed-at", "2026-06-23T15:00:00Z"]
PLAN += ["--timezone", "America/Chicago"]
FAILURE = Failure(
    invoice="inv_1",
    failed_at=datetime(2026, 6, 23, 15, tzinfo=UTC),
    timezone="America/Chicago",
    country="US",
    decline_code="insufficient_funds",
)


def load_and_plan(text: str) -> None:
    try:
        policy = parse_policy(text, name="fuzzed")
    except InvalidInput as exc:
        assert exc.field and exc.allowed  # names what is wrong and what is allowed
        return
    plan_retries(FAILURE, policy, history=[])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=policy_documents())
def test_any_policy_shaped_document_loads_or_is_refused_naming_the_field(text: str) -> None:
    load_and_plan(text)


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=120) | st.sampled_from(["[", "a = [", "[[a]]\n[a]", "a.b = 1\na = 2"]))
def test_any_text_loads_or_is_refused(text: str) -> None:
    load_and_plan(text)


@settings(max_examples=100, deadline=None)
@given(edit=st.tuples(st.integers(0, 900), st.integers(0, 40), st.text(max_size=10)))
def test_a_preset_edited_anywhere_loads_or_is_refused(edit: tuple[int, int, str]) -> None:
    text = preset_text("business-days")
    at, cut, insert = edit
    load_and_plan(text[:at] + insert + text[at + cut :])


@pytest.mark.parametrize(
    "text",
    [
        "gaps = " + "[" * 3000 + "]" * 3000,  # nested past the parser's recursion
        "gaps = " + "{a = " * 2000 + "1" + "}" * 2000,
        # An instant whose offset takes it past year 1 or 9999 in UTC (an overflow).
        'gaps = [{ days = 1 }]\n[[blackouts]]\ngateway = "g"\n'
        "start = 0001-01-01T00:00:00+14:00\nend = 2026-01-01T00:00:00Z\n",
        'gaps = [{ days = 1 }]\n[[blackouts]]\ngateway = "g"\n'
        "start = 2026-01-01T00:00:00Z\nend = 9999-12-31T23:59:59-14:00\n",
        # Outside the years an instant may take (1970–9000), which no later step expects.
        'gaps = [{ days = 1 }]\n[[blackouts]]\ngateway = "g"\n'
        "start = 0001-01-01T00:00:00Z\nend = 0002-01-01T00:00:00Z\n",
        # An unknown key holding a line break: the error is one line all the same.
        '"\\n" = false\ngaps = [{ days = 1 }]\n',
        # Digits that int() reads but that are no HH:MM.
        'gaps = [{ days = 1 }]\n[window]\nstart = "\u0661\u0660:\u0660\u0660"\n',
        'gaps = [{ days = 1 }]\n[window]\nstart = "+1:00"\n',
    ],
)
def test_found_by_fuzzing_a_clean_refusal(text: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        parse_policy(text)
    assert refused.value.field.startswith(("policy", "blackouts", "window", "'\\n'"))
    assert "\n" not in str(refused.value)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=100) | policy_documents().map(str.encode))
def test_a_policy_file_of_any_bytes_loads_or_is_refused_in_one_line(
    tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    path = tmp_path_factory.mktemp("policy") / "policy.toml"
    Path(path).write_bytes(data)
    try:
        load_policy(str(path))
    except InvalidInput as exc:
        assert exc.field.startswith("--policy")
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main([*PLAN, "--policy", str(path)])
    assert code in (0, 2), err.getvalue()
    if code == 2:
        lines = err.getvalue().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: --policy"), lines
