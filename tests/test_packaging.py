"""What a user starts with: the names `recoup` exports, and a core that runs without extras.

The core (the embedded SQLite scheduler, the time and dunning cores, the dunning runtime on
SQLite, the receiver on SQLite, and the commands that use only those) must run with none of
the extras installed: each check runs in a fresh interpreter in which importing an extra's
package fails, as it would where it was never installed."""

from __future__ import annotations

import ast
import importlib
import inspect
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

import recoup

ROOT = Path(__file__).parent.parent
EXTRAS_ONLY = (
    "fastapi",
    "starlette",
    "uvicorn",
    "psycopg",
    "psycopg_pool",
    "numpy",
    "prometheus_client",
    "matplotlib",
    "jinja2",
    "django",
    "stripe",
    "aiosmtplib",
    "aiosmtpd",
    "babel",
    "opentelemetry",
)
BLOCKER = f"""
import importlib.abc, sys
class Missing(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {EXTRAS_ONLY!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}} (an extra)", name=name)
        return None
sys.meta_path.insert(0, Missing())
"""


def run_without_extras(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    script = BLOCKER + textwrap.dedent(code)
    return subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )


def test_recoup_exports_the_names_a_user_starts_with() -> None:
    assert recoup.__all__ == [
        "BackoffPolicy",
        "Conflict",
        "Dunning",
        "DunningPolicy",
        "Failure",
        "FailureReport",
        "HandlerContext",
        "HandlerRegistry",
        "HttpTarget",
        "InvalidInput",
        "NotFound",
        "PermanentError",
        "PythonTarget",
        "RecoupError",
        "Scheduler",
        "SystemClock",
        "VirtualClock",
        "__version__",
        "dunning_runtime",
        "open_store",
        "parse_policy",
        "plan_retries",
        "preset",
    ]
    from recoup.jobs.scheduler import Scheduler
    from recoup.storage import open_store

    assert recoup.Scheduler is Scheduler and recoup.open_store is open_store
    for name in recoup.__all__:
        assert getattr(recoup, name) is not None


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        recoup.Nope  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as exc:
        assert "Nope" in str(exc)
    else:
        raise AssertionError("recoup.Nope resolved")


def test_the_core_dependencies_hold_no_extra() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = " ".join(project["dependencies"]).lower()
    for extra in ("fastapi", "uvicorn", "psycopg", "numpy", "prometheus", "matplotlib", "django"):
        assert extra not in core
    assert set(project["optional-dependencies"]) >= {
        "postgres",
        "api",
        "replay",
        "django",
        "all",
        "dev",
    }
    assert any(d.startswith("django>=") for d in project["optional-dependencies"]["django"])


def test_the_embedded_scheduler_and_dunning_run_without_any_extra(tmp_path: Path) -> None:
    done = run_without_extras(
        """
        from datetime import timedelta
        from recoup import HandlerRegistry, PythonTarget, Scheduler, open_store, VirtualClock
        from recoup import Dunning, FailureReport, plan_retries, Failure, preset
        import recoup.receiver  # the receiver on SQLite needs no driver
        from datetime import UTC, datetime
        clock = VirtualClock(datetime(2026, 6, 23, 15, tzinfo=UTC))
        store = open_store("sqlite:///core.db")
        scheduler = Scheduler(store, clock=clock)
        ran = []
        handlers = HandlerRegistry()
        handlers.add("note", lambda ctx: ran.append(ctx.payload))
        scheduler.enqueue(PythonTarget(handler="note"), payload={"n": 1})
        scheduler.worker(handlers=handlers).drain()
        assert ran == [{"n": 1}], ran
        failure = Failure(invoice="inv_1", failed_at=clock.now(), timezone="America/Chicago",
                          decline_code="insufficient_funds")
        decision = plan_retries(failure, preset("business-days"))
        assert len(decision.attempts) == 4
        print("ok")
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_the_core_commands_run_without_any_extra(tmp_path: Path) -> None:
    done = run_without_extras(
        """
        from recoup.cli import main
        codes = [
            main(["renewals", "--anchor", "2026-01-31T09:00", "--timezone", "America/New_York",
                  "--count", "3", "--json"]),
            main(["plan", "--invoice", "inv_1", "--failed-at", "2026-06-23T15:00:00Z",
                  "--timezone", "America/Chicago", "--json"]),
        ]
        print(codes)
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[0, 0]"


def test_a_command_that_needs_an_extra_says_which(tmp_path: Path) -> None:
    failures = tmp_path / "f.csv"
    failures.write_text("invoice_id,failed_at,timezone\\ninv_1,2026-06-23T15:00:00Z,UTC\\n")
    done = run_without_extras(
        """
        import sys
        from recoup.cli import main
        sys.exit(main(["replay", "f.csv"]))
        """,
        tmp_path,
    )
    assert done.returncode == 1
    assert "recoup[replay]" in done.stderr and "Traceback" not in done.stderr


def test_the_django_integration_without_django_says_which_extra(tmp_path: Path) -> None:
    done = run_without_extras(
        """
        try:
            import recoup.contrib.django
        except ImportError as exc:
            print(exc)
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "pip install 'recoup[django]'" in done.stdout


def test_importing_recoup_loads_no_module_of_its_own_until_a_name_is_used() -> None:
    # But `recoup.lazy`, the few lines that load the names on first use.
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, recoup; print(sorted(m for m in sys.modules if m.startswith('recoup.')))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.strip() == "['recoup.lazy']", done.stdout
    assert importlib.import_module("recoup").__version__


# Every package whose exports load on first use through `recoup.lazy`.
LAZY_PACKAGES = sorted(
    ".".join(init.parent.relative_to(ROOT).parts)
    for init in (ROOT / "recoup").rglob("__init__.py")
    if "lazy_getattr(__name__, _HOMES)" in init.read_text(encoding="utf-8")
)


def lazy_exports(package: str) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """From `package`'s `__init__.py` text: the lazy map (`_HOMES`), the `TYPE_CHECKING`
    imports (name → module) and `__all__`."""
    init = ROOT.joinpath(*package.split("."), "__init__.py")
    tree = ast.parse(init.read_text(encoding="utf-8"))
    homes: dict[str, str] = {}
    typed: dict[str, str] = {}
    exported: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom) and imp.module and not imp.level
                for alias in imp.names:
                    assert alias.asname is None, alias.asname
                    assert alias.name not in typed, f"{alias.name} imported twice"
                    typed[alias.name] = imp.module
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            if isinstance(target, ast.Name) and target.id == "_HOMES":
                homes = ast.literal_eval(node.value)  # type: ignore[arg-type]
            elif isinstance(target, ast.Name) and target.id == "__all__":
                exported = ast.literal_eval(node.value)  # type: ignore[arg-type]
    return homes, typed, exported


def test_the_lazy_packages_are_found() -> None:
    assert {"recoup", "recoup.jobs", "recoup.recovery"} <= set(LAZY_PACKAGES)


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_the_lazy_exports_and_the_type_checking_imports_are_one_list(package: str) -> None:
    homes, typed, exported = lazy_exports(package)
    module = importlib.import_module(package)
    assert homes and homes == module._HOMES
    assert typed == homes, f"{package}: the TYPE_CHECKING imports and _HOMES disagree"
    extra = ["__version__"] if package == "recoup" else []
    assert sorted(exported) == sorted([*homes, *extra])


@pytest.mark.parametrize(
    ("package", "name"),
    [(p, n) for p in LAZY_PACKAGES for n in sorted(lazy_exports(p)[0])],
)
def test_each_lazy_export_is_what_its_home_module_holds(package: str, name: str) -> None:
    home = lazy_exports(package)[0][name]
    value = getattr(importlib.import_module(home), name)
    if inspect.isclass(value) or inspect.isfunction(value):  # not a constant or a type alias
        # A re-export from a subpackage (recoup.jobs.worker's Worker) is defined one level down.
        defined = value.__module__
        assert defined == home or defined.startswith(f"{home}."), f"{name} is from {defined}"
    assert getattr(importlib.import_module(package), name) is value


def test_a_name_no_package_exports_is_an_attribute_error_naming_it() -> None:
    import recoup.jobs

    with pytest.raises(AttributeError, match=r"'recoup\.jobs' has no attribute 'Nothing'"):
        recoup.jobs.Nothing  # noqa: B018
