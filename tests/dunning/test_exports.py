"""The public surface of `recoup.dunning` is the intended one, and it is pure."""

from __future__ import annotations

import ast
from pathlib import Path

import recoup.dunning

INTENDED = {
    "DEFAULT_PRESET",
    "PRESETS",
    "AwaitCustomer",
    "Blackout",
    "CardAttempt",
    "Classification",
    "Decision",
    "DeclineClass",
    "DunningPolicy",
    "Failure",
    "FinalAction",
    "Gap",
    "GapUnit",
    "NetworkLimits",
    "NoRetry",
    "PlannedAttempt",
    "Retry",
    "classify",
    "decision_as_dict",
    "decision_kind",
    "default_taxonomy",
    "idempotency_key",
    "job_name",
    "parse_policy",
    "plan_after_update",
    "plan_retries",
    "preset",
}


def test_the_exported_names_are_the_intended_ones() -> None:
    assert set(recoup.dunning.__all__) == INTENDED
    assert recoup.dunning.__all__ == sorted(
        recoup.dunning.__all__, key=lambda n: (not n.isupper(), n)
    )
    for name in INTENDED:
        assert hasattr(recoup.dunning, name)


def test_the_dunning_package_reads_no_clock_environment_or_files() -> None:
    # Pure layer (ARCHITECTURE.md, "Layers"): no clock, no environment, no I/O beyond package data.
    forbidden_modules = {"os", "time", "sqlite3", "psycopg", "httpx", "pathlib"}
    forbidden_calls = {"now", "utcnow", "today", "open", "getenv"}
    package = Path(recoup.dunning.__file__).parent
    for source in package.glob("*.py"):
        tree = ast.parse(source.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                assert not {a.name.split(".")[0] for a in node.names} & forbidden_modules, source
            elif isinstance(node, ast.ImportFrom):
                assert (node.module or "").split(".")[0] not in forbidden_modules, source
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                assert node.attr not in forbidden_calls, f"{source.name}: .{node.attr}"


def test_randomness_in_the_dunning_package_is_seeded() -> None:
    # The adaptive learner draws from `random.Random(seed)` streams, never the module's global,
    # unseeded generator: a decision is reproducible from the log and a seed.
    package = Path(recoup.dunning.__file__).parent
    for source in package.glob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "random":
                raise AssertionError(f"{source.name}: from random import …")
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "random"
            ):
                assert node.attr == "Random", f"{source.name}: random.{node.attr}"
