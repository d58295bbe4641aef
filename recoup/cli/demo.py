"""`recoup demo`: a month of failed renewals recovered through the real path, on a test clock.

Contract:

    recoup demo [--size 1000] [--seed 7] [--policy business-days|calendar|adaptive|PATH]
        [--db PATH] [--scenarios FILE] [--json]

Makes a fresh SQLite database (`--db`, a path where no file exists yet; default a new
temporary directory, printed), runs `recoup.demo.run_demo` with a progress bar on stderr, then
prints the recovery report, the double charges, the customers' emails (sent to a local SMTP
sink the demo starts: how many of each kind), Recoup beside the old nightly batch, the HTML
report's path and how to open the dashboard. `--json` prints one object instead (no progress
bar): `seed`, `size`, `policy`, `clock`, `jobs_run`, `customer_events`, `double_charges`,
`emails` (`received` by kind, `total`, `not_sent` by state, `note` when the email extra is
missing), `report` (`recoup.analytics.recovery.report_json`), `nightly_comparison`, `files`,
`dashboard`, `elapsed_seconds`, and `world` (its name) with `--scenarios`. `--scenarios FILE`
is the file of `recoup gateway --scenarios`: the demo takes its world (the packaged
`calibrated` one when it names none), whose odds every retry of a soft decline then also has
at its local time, in Recoup's run and in the nightly batch alike; the same customers, so the
figures of two worlds compare. Its cards and faults are the gateway's own, not the demo's.
With an adaptive policy (`--policy adaptive`) the runtime learns as the month goes (its
own attempt log, as in production) in the packaged `calibrated` world unless `--scenarios`
names another (a world without time structure has nothing to learn), and the demo prints what
it learned (`recoup.demo.learned`: the decisions by arm, the share moved off the static slot,
the slots chosen most per decline code, the treated customers' recovery beside the holdout's
static schedule with its interval); `--json` adds `learning` (and `world`). The default demo's
output and JSON are unchanged. Exit 0; 1 when anything was charged twice (or the run
failed); 2 on bad input.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import httpx
import typer

from recoup.cli._app import app, print_json
from recoup.cli._policy import PolicyOption, load_policy
from recoup.cli._scenarios import read_scenario_file
from recoup.cli._where import LocalOnlyUrlOption
from recoup.dunning.policy import DEFAULT_PRESET
from recoup.errors import InvalidInput, RecoupError

if TYPE_CHECKING:
    from rich.console import Console

    from recoup.demo.run import DemoOptions, DemoResult

MAX_SIZE = 100_000
# Renewals by default: every behaviour of the month (each decline class, card updates, payments
# made another way, each email kind, the nightly batch's hard-decline attempts) in under half a
# minute, with 41 of the report's 97 rates above its minimum volume (62 at 1,500, 72 at 5,000).
DEFAULT_SIZE = 1000
ADAPTIVE_WORLD = "calibrated"  # an adaptive policy's world unless --scenarios names one
NEEDS = {
    "fastapi": "api",
    "uvicorn": "api",
    "matplotlib": "plot",
    "jinja2": "plot",
}


@app.command("demo")
def demo_command(
    size: Annotated[
        int, typer.Option(min=1, max=MAX_SIZE, help="How many failed renewals.")
    ] = DEFAULT_SIZE,
    seed: Annotated[int, typer.Option(help="Same seed, same customers, same figures.")] = 7,
    policy: PolicyOption = DEFAULT_PRESET,
    db: Annotated[
        Path | None,
        typer.Option("--db", help="A fresh SQLite file to create (default: a temporary one)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    scenarios: Annotated[
        Path | None,
        typer.Option(help="A scenario file (recoup gateway --scenarios) whose world to follow."),
    ] = None,
    url: LocalOnlyUrlOption = None,
) -> int:
    """Recover a month of failed renewals through the real path, on a test clock, in seconds."""
    _check_installed()
    loaded = load_policy(policy)
    world_name = None
    if scenarios is not None:
        from recoup.payments.world import packaged_world

        world_name = (read_scenario_file(scenarios)[1].world or packaged_world()).name
    db_path = _fresh_db(db)
    if scenarios is None and loaded.policy.adaptive is not None:
        # Learned timing needs a world with time in it: the packaged calibrated one.
        scenarios = db_path.with_name(db_path.stem + "-world.toml")
        scenarios.write_text(f'world = "{ADAPTIVE_WORLD}"\n', encoding="utf-8")
        world_name = ADAPTIVE_WORLD
    from recoup.demo.run import DemoOptions, run_demo

    options = DemoOptions(
        size=size,
        seed=seed,
        policy_name=policy,
        policy_toml=loaded.text,
        db_path=db_path,
        scenarios_path=None if scenarios is None else scenarios.resolve(),
        world_name=world_name,
    )
    if as_json:
        result = _failing_clearly(lambda: run_demo(options), db_path)
        html_path = _write_html(result)
        print_json(_json(result, html_path))
        _say_if_doubled(result)
        return result.exit_code
    from rich.console import Console

    console = Console()
    console.print(
        f"[bold]Recoup demo[/bold]: {size:,} renewals that failed in October 2026 "
        f"(seed {seed}, policy {policy}"
        + (f", world {world_name}" if world_name else "")
        + f")\n  database: {db_path}",
        highlight=False,
    )
    result = _failing_clearly(lambda: _run_with_progress(options), db_path)
    html_path = _write_html(result)
    from recoup.demo.summary import invoked_as

    # The closing commands as this one was typed (`.venv/bin/recoup` after scripts/setup).
    program = invoked_as(sys.argv[0], executable=sys.executable, on_path=shutil.which("recoup"))
    _print(result, html_path, console, program=program)
    return result.exit_code


def _failing_clearly(run: Callable[[], DemoResult], db_path: Path) -> DemoResult:
    """The run, or one line saying why it stopped (the billing app's log may say more)."""
    try:
        return run()
    except (OSError, httpx.HTTPError) as exc:
        log = db_path.with_name(db_path.stem + "-billing-app.log")
        raise RecoupError(f"the demo stopped: {exc} (the billing app's log: {log})") from None


def _check_installed() -> None:
    missing = sorted({extra for name, extra in NEEDS.items() if not _importable(name)})
    if missing:
        raise RecoupError(
            f"recoup demo needs the {' and '.join(missing)} extras: pip install 'recoup[all]'"
        )
    if not _importable("examples.billing_app"):
        raise RecoupError(
            "recoup demo runs the example billing app (examples/billing_app): run it from a "
            "clone of the repository, installed with pip install -e '.[all]'"
        )


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def _fresh_db(db: Path | None) -> Path:
    """The path of the new database: `--db` where nothing exists yet, or a temporary one."""
    if db is None:
        return Path(tempfile.mkdtemp(prefix="recoup-demo-")) / "recoup.db"
    text = str(db)
    if text.startswith("sqlite:///"):
        db = Path(text.removeprefix("sqlite:///"))
    elif "://" in text:
        raise InvalidInput("--db", text, "expected a path for a new SQLite file")
    from recoup.demo.files import DemoFiles

    left = DemoFiles.beside(db).existing()
    if left:
        raise InvalidInput(
            "--db",
            text,
            "expected a path where no file exists yet, nor the run's files beside it"
            f" (the demo starts afresh; found {', '.join(p.name for p in left)})",
        )
    if not db.parent.is_dir():
        raise InvalidInput("--db", text, "expected a path in an existing directory")
    return db.resolve()


def _run_with_progress(options: DemoOptions) -> DemoResult:
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from recoup.demo.run import Progress as DemoProgress
    from recoup.demo.run import run_demo

    # On stderr, and only on a terminal: stdout carries the report.
    console = Console(stderr=True)
    columns = (
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[jobs]:>7,} jobs"),
        TimeElapsedColumn(),
    )
    with Progress(
        *columns, console=console, transient=True, disable=not console.is_terminal
    ) as bar:
        task = bar.add_task("starting the billing app", total=1.0, jobs=0)

        def moved(at: DemoProgress) -> None:
            span = (at.end - at.start).total_seconds()
            done = min(1.0, (at.now - at.start).total_seconds() / span)
            when = at.now.strftime("%Y-%m-%d %H:%M")
            bar.update(task, completed=done, jobs=at.jobs_run, description=f"test clock {when} UTC")

        return run_demo(options, on_progress=moved)


def _write_html(result: DemoResult) -> str:
    from recoup.analytics.recovery.html_report import ExtraTable, render_html
    from recoup.demo.summary import (
        NIGHTLY_NOTE,
        WHAT_NEXT,
        comparison_columns,
        comparison_rows,
    )

    path = result.options.db_path.with_name(result.options.db_path.stem + "-report.html")
    nightly = ExtraTable(
        "Recoup against the old nightly batch, same customers",
        comparison_columns(result),
        tuple(comparison_rows(result)),
        NIGHTLY_NOTE,
    )
    page = render_html(result.report, extras=[nightly], next_steps=WHAT_NEXT)
    path.write_text(page, encoding="utf-8")
    return str(path)


def _json(result: DemoResult, html_path: str) -> dict[str, object]:
    from recoup.demo.summary import demo_json

    return demo_json(result, html_path)


def _print(
    result: DemoResult, html_path: str, console: Console, *, program: str = "recoup"
) -> None:
    from recoup.analytics.recovery import render_terminal
    from recoup.demo.learned import print_learning
    from recoup.demo.summary import (
        print_comparison,
        print_double_charges,
        print_emails,
        print_next_steps,
    )

    render_terminal(result.report, console)
    print_double_charges(result, console)
    print_emails(result, console)
    print_comparison(result, console)
    print_learning(result, console)
    print_next_steps(result, html_path, console, program=program)
    _say_if_doubled(result)


def _say_if_doubled(result: DemoResult) -> None:
    if result.exit_code:
        typer.echo(
            f"error: money moved twice for {result.double_charges.total} invoice(s): "
            "see double_charges",
            err=True,
        )


__all__ = ["demo_command"]
