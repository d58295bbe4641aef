"""`recoup replay FAILURES.csv`: the dry run. Plans every failure, schedules nothing."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from recoup.cli._app import app, print_json
from recoup.cli._policy import PolicyOption, load_policy
from recoup.dunning.policy import DEFAULT_PRESET
from recoup.errors import InvalidInput, RecoupError

COMPARE_CHOICES = ("nightly",)


class _Progress:
    """Phases and a row count on a rich progress bar (stderr), or nothing off a terminal."""

    def __init__(self, bar: Any | None) -> None:
        self._bar = bar
        self._task = bar.add_task("reading", total=None) if bar is not None else None

    def phase(self, name: str) -> None:
        if self._bar is not None:
            self._bar.update(self._task, description=name)

    def rows(self, done: int, total: int) -> None:
        if self._bar is not None:
            self._bar.update(self._task, completed=done, total=total)


@contextmanager
def _progress(enabled: bool) -> Iterator[_Progress]:
    if not enabled:
        yield _Progress(None)
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    columns = ("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn())
    # On stderr: stdout carries the summary (`--json` is piped into other tools).
    console = Console(stderr=True)
    with Progress(*columns, TimeElapsedColumn(), transient=True, console=console) as bar:
        yield _Progress(bar)


def _print_summary(summary: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(
        f"invoices {summary['invoices']}: retry {summary['retry']}, "
        f"no retry {summary['no_retry']}, await customer {summary['await_customer']}; "
        f"attempts {summary['attempts']}, busiest minute {summary['peak_per_minute']}"
    )
    table = Table("hour", "UTC", "local")
    nightly = summary.get("nightly")
    if nightly:
        table.add_column("nightly UTC")
        table.add_column("nightly local")
    for h in range(24):
        cells = [f"{h:02d}", str(summary["by_utc_hour"][h]), str(summary["by_local_hour"][h])]
        if nightly:
            cells += [str(nightly["by_utc_hour"][h]), str(nightly["by_local_hour"][h])]
        table.add_row(*cells)
    console.print(table)
    if nightly:
        console.print(f"nightly batch busiest minute: {nightly['peak_per_minute']}")
    unknown = summary.get("unknown_codes") or {}
    if unknown:
        shown = ", ".join(f"{code} ×{count}" for code, count in unknown.items())
        console.print(f"unknown decline codes (planned as soft, capped): {shown}", markup=False)


PLOT_SUFFIXES = (".png",)  # what `plot_hours` writes (matplotlib's Agg backend, PNG)


def _check_writable(option: str, path: Path) -> None:
    """Refuse an output path before any planning: a missing directory, a directory, or a file
    that cannot be written. Opened for append, so an existing file is left as it is."""
    if path.is_dir():
        raise InvalidInput(option, str(path), "expected a file path, not a directory")
    existed = path.exists()
    try:
        with path.open("a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise InvalidInput(
            option, str(path), f"expected a writable file path ({exc.strerror or exc})"
        ) from None
    if not existed:
        path.unlink(missing_ok=True)


def _with_path(exc: InvalidInput, failures: Path) -> InvalidInput:
    """The pure layer names the file `FAILURES.csv`; the user typed a path."""
    if exc.field.startswith("FAILURES.csv"):
        field = str(failures) + exc.field.removeprefix("FAILURES.csv")
        return InvalidInput(field, exc.value, exc.allowed)
    return exc


@app.command("replay")
def replay_command(
    failures: Annotated[
        Path, typer.Argument(metavar="FAILURES.csv", help="CSV: invoice_id, failed_at, timezone, …")
    ],
    policy: PolicyOption = DEFAULT_PRESET,
    out: Annotated[
        Path | None, typer.Option("--out", help="Write every planned attempt to this CSV.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    compare: Annotated[
        str | None, typer.Option("--compare", help="Add a baseline: nightly (00:00 UTC batch).")
    ] = None,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Draw the hour histograms to this PNG.")
    ] = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="Fail on the first bad row instead of skipping it.")
    ] = False,
) -> None:
    """Dry-run a file of failures through a retry policy; writes nothing to any job store."""
    if compare is not None and compare not in COMPARE_CHOICES:
        raise InvalidInput("--compare", compare, f"expected one of {list(COMPARE_CHOICES)}")
    if plot is not None and plot.suffix.lower() not in PLOT_SUFFIXES:
        raise InvalidInput("--plot", str(plot), f"expected a file ending in {PLOT_SUFFIXES[0]}")
    if plot is not None and importlib.util.find_spec("matplotlib") is None:
        raise InvalidInput("--plot", str(plot), "needs matplotlib (pip install 'recoup[plot]')")
    for option, path in (("--out", out), ("--plot", plot)):
        if path is not None:
            _check_writable(option, path)
    try:  # numpy: loaded by the one command that needs it
        from recoup.analytics import replay as engine
    except ModuleNotFoundError as exc:
        raise RecoupError(
            f"recoup replay needs {exc.name or 'numpy'}: pip install 'recoup[replay]'"
        ) from None

    chosen = load_policy(policy).policy
    try:
        text = failures.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(
            str(failures), str(failures), f"expected a readable UTF-8 file ({exc})"
        ) from None
    with _progress(sys.stderr.isatty()) as progress:
        try:
            rows, bad = engine.read_failures(text, strict=strict)
        except InvalidInput as exc:
            raise _with_path(exc, failures) from None
        for row in bad:
            typer.echo(f"skipped {failures.name} {row.message}", err=True)
        progress.phase("planning")
        result = engine.replay_failures(rows, chosen, on_progress=progress.rows)
        progress.phase("summarising")
        summary = engine.summarize(result, compare_nightly=compare == "nightly")
    summary["bad_rows"] = len(bad)
    summary["policy"] = chosen.name
    if out is not None:
        with out.open("w", encoding="utf-8", newline="") as handle:
            engine.write_planned(result, handle)
    if plot is not None:
        try:
            engine.plot_hours(summary, str(plot))
        except ImportError:
            raise InvalidInput(
                "--plot", str(plot), "needs matplotlib (pip install 'recoup[plot]')"
            ) from None
    if as_json:
        print_json(summary)
    else:
        _print_summary(summary)
