"""Fuzzing the failures CSV of `recoup replay`: any text, and any bytes a file may hold, is
read into rows and line-numbered bad rows, or refused with `InvalidInput`; never a traceback.
What is read plans and reports without error too, since a replay goes on to do both."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recoup.analytics.replay import read_failures, replay_failures, summarize
from recoup.cli import main
from recoup.dunning import preset
from recoup.errors import InvalidInput

HEADER = "invoice_id,failed_at,timezone,country,decline_code,advice_code,gateway,merchant_id"
# Cells near the valid ones: what breaks a parser is rarely pure noise.
CELLS = st.one_of(
    st.sampled_from(
        [
            "inv_1",
            "",
            " ",
            "2026-06-23T15:00:00Z",
            "2026-06-23T15:00:00+14:00",
            "0001-01-01T00:00:00+14:00",
            "9999-12-31T23:59:59-14:00",
            "2026-02-30T00:00:00Z",
            "20260623T150000Z",
            "2026-06-23T15:00:00",
            "America/New_York",
            "Etc/GMT+14",
            "localtime",
            "../../etc/passwd",
            "US",
            "us",
            "ZZ",
            "insufficient_funds",
            "25;try_again_later",
            ";;",
            '"quoted, with a comma"',
            '"unterminated',
            "\x00",
            "\ufeff",
            "\u2028",
            "é",
        ]
    ),
    st.text(max_size=12),
)
LINES = st.one_of(
    st.lists(CELLS, min_size=0, max_size=10).map(",".join),
    st.text(max_size=40),
)
SEPARATORS = st.sampled_from(["\n", "\r\n", "\r", "\n\n"])


@st.composite
def csv_texts(draw: st.DrawFn) -> str:
    """A header (usually the right one, sometimes not) and lines of cells."""
    header = draw(st.sampled_from([HEADER, "invoice_id,failed_at,timezone", "a,b", ""]) | LINES)
    lines = draw(st.lists(LINES, max_size=6))
    separator = draw(SEPARATORS)
    return separator.join([header, *lines]) + draw(st.sampled_from(["", separator]))


def read_and_plan(text: str) -> None:
    """Read `text` as `recoup replay` does, and plan and summarise what was read; anything but
    `InvalidInput` (a refused header, or a bad row under --strict) fails the test."""
    for strict in (False, True):
        try:
            rows, bad = read_failures(text, strict=strict)
        except InvalidInput as exc:
            assert "FAILURES.csv" in exc.field  # names the header, or the line and column
            continue
        for row in bad:
            assert row.line >= 2 and row.column and row.expected
        assert all(line >= 2 for line in rows.line.tolist())
        summarize(replay_failures(rows, preset("business-days")))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=csv_texts())
def test_any_csv_text_is_read_or_refused_cleanly(text: str) -> None:
    read_and_plan(text)


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=200))
def test_any_text_at_all_is_read_or_refused_cleanly(text: str) -> None:
    read_and_plan(HEADER + "\n" + text)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=200) | csv_texts().map(lambda t: t.encode("utf-8", "surrogatepass")))
def test_the_command_reads_any_file_or_says_why_not_in_one_line(
    tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    path = tmp_path_factory.mktemp("csv") / "failures.csv"
    Path(path).write_bytes(data)
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(["replay", str(path), "--json"])  # any other exception fails the test
    assert code in (0, 2), err.getvalue()
    if code == 2:
        (line,) = err.getvalue().splitlines()  # one line that says why
        assert line.startswith("error: ") and str(path) in line


@pytest.mark.parametrize(
    "text",
    [
        # A lone carriage return (old Mac line ends, or a stray one): the csv module stopped
        # with "new-line character seen in unquoted field", a traceback.
        HEADER + "\rinv_1,2026-06-23T15:00:00Z,UTC,,,,,\r",
        "invoice_id,failed_at,timezone\r\n" + 'inv_1,"2026-06-23T15:00:00Z\r",UTC\r\n',
    ],
)
def test_found_by_fuzzing_carriage_returns_are_line_ends(text: str) -> None:
    rows, bad = read_failures(text)
    assert len(rows) + len(bad) == 1


def test_found_by_fuzzing_what_the_csv_module_cannot_read_names_the_line() -> None:
    # A quote opened and never closed in a big file: everything after it is one field, past the
    # csv module's field limit (128 KiB), and its csv.Error was a traceback.
    text = HEADER + '\ninv_1,"2026' + "x" * 200_000 + "\ninv_2,2026-06-23T15:00:00Z,UTC\n"
    with pytest.raises(InvalidInput) as refused:
        read_failures(text)
    assert refused.value.field == "FAILURES.csv line 2"
