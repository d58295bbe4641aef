"""Logging for the long-running commands (`recoup serve`, `recoup worker`): a level, and lines
of text or JSON that carry the fields Recoup's loggers attach to a record (tenant, job id and
name, attempt, outcome…), so an operator can grep or query one job's story.

    recoup worker --log-level info --log-format json      # or RECOUP_LOG_LEVEL / RECOUP_LOG_FORMAT
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from datetime import UTC, datetime
from typing import IO, Any, Final

from recoup.errors import InvalidInput

LEVELS: Final = ("debug", "info", "warning", "error")
FORMATS: Final = ("text", "json")
# The attributes a record may carry (`extra=`), in the order a text line shows them.
FIELDS: Final = (
    "tenant",
    "job_id",
    "job_name",
    "attempt",
    "outcome",
    "status_code",
    "duration_ms",
    "retry_at",
    "error",
    "worker_id",
)


def _value(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return value


def record_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The `FIELDS` that `record` carries, JSON-ready."""
    return {name: _value(getattr(record, name)) for name in FIELDS if hasattr(record, name)}


# One encoder for every line (`json.dumps` with options builds one per call).
_JSON = json.JSONEncoder(default=str, ensure_ascii=False).encode
_NEEDS_QUOTES = re.compile(r'[ "=\n]')  # what makes a text line's value JSON-quoted


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC), level, logger, message, then the fields."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": _value(datetime.fromtimestamp(record.created, UTC)),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            **record_fields(record),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return _JSON(line)


class TextFormatter(logging.Formatter):
    """`time level logger message key=value …`, values with spaces or quotes JSON-quoted."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")
        # (a second, its date and clock time): one tuple, replaced whole, so that threads
        # sharing the formatter never read one's second with another's text.
        self._stamped: tuple[int, str] = (-1, "")

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        """`logging.Formatter`'s time, its date and clock time formatted once per second
        rather than once per line (a worker logs every attempt)."""
        if datefmt is not None:
            return super().formatTime(record, datefmt)
        second = int(record.created)
        stamped, stamp = self._stamped
        if second != stamped:
            stamp = time.strftime(self.default_time_format, self.converter(second))
            self._stamped = (second, stamp)
        if self.default_msec_format is None:
            return stamp
        return self.default_msec_format % (stamp, record.msecs)

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        pairs = [f"{k}={_quoted(v)}" for k, v in record_fields(record).items()]
        if not pairs:
            return line
        head, sep, trace = line.partition("\n")  # keep a traceback below the fields
        return f"{head} {' '.join(pairs)}{sep}{trace}"


def _quoted(value: Any) -> str:
    text = str(value)
    if not text or _NEEDS_QUOTES.search(text):
        return json.dumps(text, ensure_ascii=False)
    return text


def configure_logging(level: str, fmt: str, *, stream: IO[str] | None = None) -> None:
    """Send every logger's records at `level` or above to `stream` (stderr) as `fmt` lines.
    An unknown level or format → `InvalidInput` naming the option."""
    if level.lower() not in LEVELS:
        raise InvalidInput("--log-level", level, f"expected one of {', '.join(LEVELS)}")
    if fmt.lower() not in FORMATS:
        raise InvalidInput("--log-format", fmt, f"expected one of {', '.join(FORMATS)}")
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt.lower() == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


__all__ = [
    "FIELDS",
    "FORMATS",
    "LEVELS",
    "JsonFormatter",
    "TextFormatter",
    "configure_logging",
    "record_fields",
]
