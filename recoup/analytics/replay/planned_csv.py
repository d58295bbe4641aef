"""Writing a replay's planned attempts as the `--out` CSV, the text `recoup plan` prints."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import TextIO

import numpy as np

from recoup.analytics.replay.bulk import ReplayResult
from recoup.dunning.outcomes import idempotency_key


def _offset_text(seconds: int) -> str:
    probe = datetime(2000, 1, 1, tzinfo=timezone(timedelta(seconds=seconds)))
    return probe.isoformat()[19:]  # what `format_local` prints after the wall time


def planned_lines(result: ReplayResult, *, chunk: int = 200_000) -> Iterator[str]:
    """The `--out` CSV, line by line: `invoice_id,attempt,at,local,idempotency_key`, in row
    order then attempt order; the same text `recoup plan` prints for each attempt."""
    yield "invoice_id,attempt,at,local,idempotency_key\n"
    invoices = result.rows.invoice
    needs_quoting = any(("," in s or '"' in s or "\n" in s) for s in invoices)
    for start in range(0, result.attempt_at.size, chunk):
        stop = start + chunk
        at = result.attempt_at[start:stop]
        off = result.attempt_offset[start:stop]
        at_text = np.datetime_as_string(at.astype("datetime64[s]"), unit="s").tolist()
        local_text = np.datetime_as_string((at + off).astype("datetime64[s]"), unit="s").tolist()
        suffix = {o: _offset_text(o) for o in np.unique(off).tolist()}
        rows = result.attempt_row[start:stop].tolist()
        numbers = result.attempt_number[start:stop].tolist()
        offsets = off.tolist()
        if needs_quoting:
            buffer = io.StringIO()
            writer = csv.writer(buffer, lineterminator="\n")
            for r, k, a, loc, o in zip(rows, numbers, at_text, local_text, offsets, strict=True):
                inv = invoices[r]
                writer.writerow([inv, k, a + "Z", loc + suffix[o], idempotency_key(inv, k)])
            yield buffer.getvalue()
        else:
            yield "".join(
                f"{invoices[r]},{k},{a}Z,{loc}{suffix[o]},retry:{invoices[r]}:{k}\n"
                for r, k, a, loc, o in zip(rows, numbers, at_text, local_text, offsets, strict=True)
            )


def write_planned(result: ReplayResult, out: TextIO) -> None:
    """Write the `--out` CSV to `out`."""
    for text in planned_lines(result):
        out.write(text)


__all__ = ["planned_lines", "write_planned"]
