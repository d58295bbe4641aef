"""Every exception class of the package derives from `recoup.errors.RecoupError`, and
`recoup.errors` names each one defined elsewhere, with its module, in `HOMES` and in its
docstring's tree.

The package is walked in a fresh interpreter (so that configuring Django there, for
`recoup.contrib.django` to import, leaves this one as it was): every module imported, every
exception class at the top of a module read off with whether it derives from the root."""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import recoup.errors
from recoup.errors import HOMES, InvalidInput, RecoupError
from recoup.jobs.handler_attempts import result_of_exception
from recoup.jobs.handlers import PermanentError
from recoup.jobs.targets import AttemptOutcome
from recoup.recovery.attempts import AskAgain

ROOT = Path(__file__).resolve().parent.parent

WALK = """
import importlib, importlib.util, json, os, pkgutil, sys
import recoup
from recoup.errors import RecoupError
if importlib.util.find_spec("django") is not None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.contrib_django.settings"
    import django
    django.setup()
failed = []
for info in pkgutil.walk_packages(recoup.__path__, "recoup."):
    if info.name.rsplit(".", 1)[-1] == "__main__":
        continue  # it runs the command line
    if info.name.startswith("recoup.contrib.django") and "django" not in sys.modules:
        continue  # the extra is not installed
    try:
        importlib.import_module(info.name)
    except Exception as exc:
        failed.append(f"{info.name}: {exc!r}")
found = []
for name, module in sorted(sys.modules.items()):
    if name != "recoup" and not name.startswith("recoup."):
        continue
    for value in list(vars(module).values()):
        # type(value), not isinstance: Django's lazy settings would answer by setting up
        if issubclass(type(value), type) and issubclass(value, BaseException):
            if value.__module__ == name:
                found.append([name, value.__qualname__, issubclass(value, RecoupError)])
print(json.dumps({"failed": failed, "found": sorted(found)}))
"""


@pytest.fixture(scope="module")
def walked() -> list[tuple[str, str, bool]]:
    """(module, class name, derives from the root) of every exception class of the package."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    done = subprocess.run(
        [sys.executable, "-c", WALK],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.splitlines()[-1])
    assert out["failed"] == [], "modules the walk could not import"
    return [(module, name, rooted) for module, name, rooted in out["found"]]


def test_every_exception_class_derives_from_the_root(walked: list[tuple[str, str, bool]]) -> None:
    outside = [f"{module}.{name}" for module, name, rooted in walked if not rooted]
    assert outside == [], "derive these from recoup.errors.RecoupError"
    assert len(walked) >= 40  # the walk did find the package's exceptions


def test_errors_names_every_exception_defined_elsewhere_with_its_module(
    walked: list[tuple[str, str, bool]],
) -> None:
    elsewhere = {name: module for module, name, _ in walked if module != "recoup.errors"}
    assert len(elsewhere) == len([m for m, _, _ in walked if m != "recoup.errors"]), "a name twice"
    assert HOMES == dict(sorted(elsewhere.items())), "recoup.errors.HOMES is out of date"


def test_the_docstrings_tree_shows_every_exception() -> None:
    tree = recoup.errors.__doc__ or ""
    here = [n for n in recoup.errors.__all__ if n != "HOMES"]
    missing = [n for n in [*here, *HOMES] if not re.search(rf"[─ ]{re.escape(n)}\b", tree)]
    assert missing == [], "add these to the tree in recoup.errors' docstring"


@pytest.mark.parametrize("name", sorted(n for n in HOMES if not n.startswith("_")))
def test_each_public_exception_is_imported_from_its_home(name: str) -> None:
    if HOMES[name].startswith("recoup.contrib.django"):
        pytest.skip("importing it here would configure Django for the rest of the suite")
    found = getattr(importlib.import_module(HOMES[name]), name)
    assert isinstance(found, type) and issubclass(found, RecoupError)


def test_a_handlers_exception_is_told_apart_by_its_class_not_by_the_root() -> None:
    started = time.perf_counter()
    outcome = {
        exc: result_of_exception(exc, started).outcome
        for exc in (PermanentError("no"), AskAgain("later"), InvalidInput("f", 1, "no"))
    }
    assert list(outcome.values()) == [
        AttemptOutcome.FAILED,  # fails its job, without retry
        AttemptOutcome.RETRY,  # a RecoupError too, retried with the job's backoff
        AttemptOutcome.RETRY,
    ]
