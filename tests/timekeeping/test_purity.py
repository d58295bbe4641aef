"""The time core is pure (ARCHITECTURE.md, "Layers"): no clock, no environment, no I/O.

`SystemClock.now` in clock.py is the one sanctioned reading of the system clock; every other
module takes `now` (or a `Clock`) as an argument.
"""

from __future__ import annotations

import ast
from pathlib import Path

import recoup.timekeeping

PACKAGE = Path(recoup.timekeeping.__file__).parent
FORBIDDEN_MODULES = {
    "os",
    "time",
    "socket",
    "sqlite3",
    "psycopg",
    "httpx",
    "pathlib",
    "random",
    "subprocess",
    "urllib",
    "tzlocal",
    "recoup.jobs",
    "recoup.storage",
    "recoup.api",
    "recoup.cli",
    "recoup.dunning",
    "recoup.analytics",
}
FORBIDDEN_ATTRIBUTES = {"now", "utcnow", "today", "getenv", "environ", "localtime", "time_ns"}
FORBIDDEN_NAMES = {"open", "input", "print"}
# (module file, attribute) pairs that are allowed: the system clock itself.
ALLOWED = {("clock.py", "now")}


def _forbidden(module: str) -> bool:
    return any(module == bad or module.startswith(bad + ".") for bad in FORBIDDEN_MODULES)


def test_the_time_core_imports_no_clock_environment_io_or_higher_layer() -> None:
    sources = sorted(PACKAGE.glob("*.py"))
    assert sources, PACKAGE
    for source in sources:
        tree = ast.parse(source.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    assert not _forbidden(alias.name), f"{source.name}: import {alias.name}"
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                module = node.module or ""
                assert not _forbidden(module), f"{source.name}: from {module} import …"


def test_only_the_system_clock_reads_the_clock_and_nothing_reads_env_or_files() -> None:
    for source in sorted(PACKAGE.glob("*.py")):
        tree = ast.parse(source.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in FORBIDDEN_ATTRIBUTES:
                assert (source.name, node.attr) in ALLOWED, f"{source.name}: .{node.attr}"
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id not in FORBIDDEN_NAMES, f"{source.name}: {node.func.id}()"
