"""Log lines as an operator reads them: text with key=value fields, or one JSON object."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from recoup.cli import main
from recoup.errors import InvalidInput
from recoup.logs import TextFormatter, configure_logging


@pytest.fixture
def restored_root() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def attempt_record(stream: io.StringIO, fmt: str) -> str:
    configure_logging("info", fmt, stream=stream)
    logging.getLogger("recoup.attempts").warning(
        "job %s attempt %d: %s",
        "renewal inv_1",
        2,
        "failed",
        extra={
            "tenant": "acme",
            "job_id": "j1",
            "job_name": "renewal inv_1",
            "attempt": 2,
            "outcome": "failed",
            "retry_at": datetime(2026, 3, 8, 7, 30, tzinfo=UTC),
        },
    )
    logging.getLogger("recoup.attempts").debug("below the level")
    return stream.getvalue()


@pytest.mark.usefixtures("restored_root")
def test_json_lines_carry_the_job_fields() -> None:
    lines = attempt_record(io.StringIO(), "json").splitlines()
    assert len(lines) == 1
    line = json.loads(lines[0])
    assert line["level"] == "warning" and line["logger"] == "recoup.attempts"
    assert line["message"] == "job renewal inv_1 attempt 2: failed"
    assert (line["tenant"], line["job_id"], line["attempt"], line["outcome"]) == (
        "acme",
        "j1",
        2,
        "failed",
    )
    assert line["retry_at"] == "2026-03-08T07:30:00Z"
    assert line["time"].endswith("Z")


@pytest.mark.usefixtures("restored_root")
def test_text_lines_end_with_quoted_key_value_pairs() -> None:
    line = attempt_record(io.StringIO(), "text").strip()
    assert line.endswith(
        'tenant=acme job_id=j1 job_name="renewal inv_1" attempt=2 outcome=failed'
        " retry_at=2026-03-08T07:30:00Z"
    )
    assert " WARNING recoup.attempts job renewal inv_1 attempt 2: failed " in line


def test_text_lines_show_each_records_own_time_to_the_millisecond() -> None:
    # The date and clock time are formatted once per second: records within one second keep
    # their own milliseconds, and the next second's show the next second.
    formatter = TextFormatter()
    logger = logging.getLogger("recoup.attempts")

    def stamp(created: float, msecs: float) -> str:
        record = logger.makeRecord(logger.name, logging.INFO, __file__, 0, "m", (), None)
        record.created, record.msecs = created, msecs
        expected = logging.Formatter().formatTime(record)
        assert formatter.formatTime(record) == expected
        return expected

    first, same = stamp(1780315205.125, 125.0), stamp(1780315205.875, 875.0)
    later = stamp(1780315206.25, 250.0)
    assert first.endswith(",125") and same.endswith(",875")
    assert first[:-4] == same[:-4] != later[:-4]


@pytest.mark.parametrize(
    ("level", "fmt", "option"), [("loud", "text", "--log-level"), ("info", "xml", "--log-format")]
)
def test_an_unknown_level_or_format_names_its_option(level: str, fmt: str, option: str) -> None:
    with pytest.raises(InvalidInput, match=option):
        configure_logging(level, fmt)


def test_the_worker_refuses_a_bad_log_level_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: object
) -> None:
    assert main(["worker", "--db", "sqlite:///:memory:", "--log-level", "loud"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "error: --log-level: 'loud' is not valid; expected one of debug, info, warning, error"
    ]


def test_any_option_can_come_from_a_recoup_variable(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RECOUP_WORKER_CONCURRENCY", "0")
    assert main(["worker", "--db", "sqlite:///:memory:"]) == 2
    assert "--concurrency" in capsys.readouterr().err
    monkeypatch.setenv("RECOUP_LOG_FORMAT", "xml")
    monkeypatch.delenv("RECOUP_WORKER_CONCURRENCY")
    assert main(["worker", "--db", "sqlite:///:memory:"]) == 2
    assert "--log-format: 'xml'" in capsys.readouterr().err
