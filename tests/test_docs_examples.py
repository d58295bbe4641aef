"""Every code block of the documentation (README.md, docs/*.md, ARCHITECTURE.md) runs as a new
user would run it, against this machine only.

Each fenced block is one test, by its language:

- `python`: run in a fresh interpreter in an empty directory; a block titled as a file of a
  Django project (`title="urls.py"`) is one of the Django example's files, run together by
  `test_the_django_example_runs_as_written`;
- `sh`: run by bash (`set -euo pipefail`) in an empty directory, `recoup` and `.venv/bin/` being
  this environment's;
- `toml`: a policy (it has `gaps`) loaded and validated by `recoup.parse_policy`, else parsed;
- `json`: parsed.

A block that cannot run offline (it starts a server, needs a Stripe account, …) is marked by
an HTML comment on the line before its fence, `<!-- not-run: why -->`, and is reported as
skipped with that reason (pytest's `-ra` lists each). Plain text blocks (output, diagrams) are
not code and are not collected. Every `recoup …` command in any shell block, run or not, must
name real sub-commands and options; every install line must name extras that exist.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
import zipfile
from dataclasses import dataclass
from email.parser import Parser
from pathlib import Path
from typing import Any

import pytest

from recoup import parse_policy
from recoup.jobs.signing import new_signing_secret

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(
    r"^```(?P<lang>[\w+-]*)(?P<info>[^\n]*)\n(?P<body>.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL
)
NOT_RUN = re.compile(r"^<!--\s*not-run:\s*(?P<why>.+?)\s*-->$")
SNIPPET = re.compile(r'^--8<-- "(?P<path>[^"]+)"$', re.MULTILINE)
TITLE = re.compile(r'title="(?P<title>[^"]+)"')
DJANGO_FILES = ("settings.py", "billing/models.py", "billing/payments.py", "urls.py")
NOT_CODE = {"", "text"}
URL = re.compile(r"https?://[^\s\"'`)]+")
LOOPBACK = re.compile(r"https?://(127\.0\.0\.1|localhost|\[::1\])([:/]|$)")
BIN = Path(sys.executable).parent
# The README's first block: the set-up commands, which CI runs as .ci/run (scripts/setup, then
# scripts/test, which runs the demo in tests/demo); the README keeps it right under its title.
SETUP = "scripts/setup && .venv/bin/recoup demo\nscripts/test\n"


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    lang: str
    title: str | None
    body: str
    not_run: str | None

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def _blocks() -> list[Block]:
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
            marked = NOT_RUN.match(before)
            title = TITLE.search(match["info"])
            body = SNIPPET.sub(lambda m: (ROOT / m["path"]).read_text("utf-8"), match["body"])
            found.append(
                Block(
                    page=str(page.relative_to(ROOT)),
                    line=line,
                    lang=match["lang"],
                    title=title["title"] if title else None,
                    body=body,
                    not_run=marked["why"] if marked else None,
                )
            )
    return found


BLOCKS = _blocks()
CODE = [b for b in BLOCKS if b.lang not in NOT_CODE]


def _env() -> dict[str, str]:
    """This checkout first on the path (the code the docs describe), this environment's tools."""
    return os.environ | {
        "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
        "PATH": os.pathsep.join([str(BIN), os.environ.get("PATH", "")]),
    }


def _run(argv: list[str], cwd: Path, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=120, **kwargs
    )


def test_the_pages_have_code_blocks_and_every_language_is_known() -> None:
    assert len(CODE) > 20, "the pattern finds too few blocks"
    assert {b.lang for b in CODE} <= {"python", "sh", "toml", "json"}, [
        b.where for b in CODE if b.lang not in {"python", "sh", "toml", "json"}
    ]
    assert [b.where for b in BLOCKS if b.lang == "bash"] == [], "write sh, not bash"


@pytest.mark.parametrize("block", CODE, ids=[f"{b.where}:{b.lang}" for b in CODE])
def test_the_code_block_runs(block: Block, tmp_path: Path) -> None:
    if block.not_run is not None:
        pytest.skip(f"{block.where}: not run: {block.not_run}")
    if block.body == SETUP:
        pytest.skip(f"{block.where}: the set-up commands, run by .ci/run")
    if block.lang == "python" and block.title in DJANGO_FILES:
        pytest.skip(f"{block.where}: {block.title}, run by test_the_django_example_runs_as_written")
    match block.lang:
        case "python":
            ran = _run([sys.executable, "-c", block.body], tmp_path)
            assert ran.returncode == 0, ran.stderr
        case "sh":
            script = "set -euo pipefail\n" + block.body.replace(".venv/bin/", f"{BIN}/")
            ran = _run(["bash", "-c", script], tmp_path)
            assert ran.returncode == 0, ran.stdout + ran.stderr
        case "toml":
            if "gaps" in tomllib.loads(block.body):
                parse_policy(block.body)
        case "json":
            json.loads(block.body)


def test_every_url_in_a_code_block_is_on_loopback() -> None:
    found = [url for block in CODE for url in URL.findall(block.body)]
    assert found, "the examples call nothing: the pattern is wrong"
    assert [url for url in found if not LOOPBACK.match(url)] == []


# --- the commands in shell blocks name real commands and options ---------------------------


def _commands(script: str) -> list[list[str]]:
    """Each `recoup …` invocation of a shell block, as its words."""
    joined = script.replace("\\\n", " ")
    found = []
    for line in joined.splitlines():
        try:
            words = shlex.split(line, comments=True)
        except ValueError:  # an unbalanced quote in a comment's output line
            continue
        current: list[str] = []
        for word in [*words, ";"]:
            if word in {"&&", "||", "|", ";", "&"} or word.endswith((";", "&")):
                if current and Path(current[0]).name == "recoup":
                    found.append(current)
                current = []
            else:
                current.append(word)
    return found


def _cli() -> Any:
    import typer

    from recoup.cli import load_commands

    return typer.main.get_command(load_commands())


def test_every_recoup_command_in_the_docs_names_real_options() -> None:
    from typer import _click as click

    root = _cli()
    checked = 0
    wrong = []
    for block in (b for b in CODE if b.lang == "sh"):
        for words in _commands(block.body):
            command, path = root, ["recoup"]
            rest = words[1:]
            while rest and hasattr(command, "list_commands"):
                found = command.get_command(click.Context(command), rest[0])
                if found is None:
                    break
                command, path, rest = found, [*path, rest[0]], rest[1:]
            if hasattr(command, "list_commands") and path != ["recoup"]:
                wrong.append(f"{block.where}: `{' '.join(path)} {rest[:1]}` is no command")
                continue
            options = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
            options.add("--help")
            for word in rest:
                name = word.split("=", 1)[0]
                if name.startswith("--") and name not in options:
                    wrong.append(f"{block.where}: `{' '.join(path)}` has no option {name}")
            checked += 1
    assert checked > 10
    assert wrong == []


# --- what some blocks promise to print -----------------------------------------------------


def test_the_embedding_example_prints_what_its_comments_say(tmp_path: Path) -> None:
    examples = [b for b in CODE if b.lang == "python" and "running_worker" in b.body]
    assert {b.page for b in examples} == {"README.md", "docs/scheduler.md"}
    assert len({b.body for b in examples}) == 1, "the README and the scheduler guide differ"
    example = examples[0].body
    # The output a reader is promised: the comment lines right after a call that prints.
    promised = [line.removeprefix("# ") for line in example.splitlines() if line.startswith("# ")]
    assert len(promised) == 2
    ran = _run([sys.executable, "-c", example], tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == promised


def test_the_plan_example_prints_the_output_shown(tmp_path: Path) -> None:
    (i,) = [i for i, b in enumerate(BLOCKS) if b.lang == "sh" and "recoup plan" in b.body]
    command, shown = BLOCKS[i], BLOCKS[i + 1]
    assert shown.lang == "text" and shown.page == command.page
    ran = _run(["bash", "-c", command.body], tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == shown.body.strip()


# --- the Django example --------------------------------------------------------------------


def test_the_django_example_runs_as_written(tmp_path: Path) -> None:
    pytest.importorskip("django", reason="recoup[django] is not installed")
    files = {b.title: b for b in CODE if b.lang == "python" and b.title in DJANGO_FILES}
    assert sorted(files) == sorted(DJANGO_FILES)
    assert {b.page for b in files.values()} == {"docs/django.md"}
    project = tmp_path / "project"
    (project / "billing").mkdir(parents=True)
    (project / "billing" / "__init__.py").write_text("")
    for name, block in files.items():
        text = block.body
        if name == "settings.py":  # added to the project's own settings, as the docs say
            text = "from tests.docs_django.base_settings import *  # noqa: F403\n\n" + text
        (project / name).write_text(text)
    env = {
        "PYTHONPATH": os.pathsep.join([str(project), str(ROOT)]),
        "DJANGO_SETTINGS_MODULE": "settings",
        "RECOUP_SIGNING_SECRET": new_signing_secret(),
        "DOCS_DJANGO_DB": str(tmp_path / "django.sqlite3"),
    }
    ran = subprocess.run(
        [sys.executable, "-m", "tests.docs_django.exercise"],
        cwd=project,
        env=os.environ | env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stdout.splitlines() == [
        "migrate and check: ok",
        "charge: succeeded, invoice paid",
        "charge delivered again: replayed",
        "event: answered once signed, 401 unsigned",
    ]


# --- install lines -------------------------------------------------------------------------

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
EXTRAS = set(PYPROJECT["project"]["optional-dependencies"])
INSTALL = re.compile(r"pip install [^\n`]*")


def test_every_install_line_installs_from_a_clone_or_a_wheel() -> None:
    """Recoup is on no index: an install names a path (`.`, a wheel) or a folder of wheels,
    and only extras that exist."""
    lines = [
        (page.name, m.group(0))
        for page in PAGES
        for m in INSTALL.finditer(page.read_text("utf-8"))
        if "recoup" in m.group(0) or "'." in m.group(0)
    ]
    assert len(lines) >= 4
    wrong = []
    for page, line in lines:
        for spec in re.findall(r"'([^']*)'", line):
            parts = re.match(r"(?P<target>[^\[\s]+)(?:\[(?P<extras>[^\]]*)\])?", spec)
            assert parts is not None, spec
            target = parts["target"]
            named = set(filter(None, (parts["extras"] or "").split(",")))
            if named - EXTRAS:
                wrong.append(f"{page}: {line}: no extra {sorted(named - EXTRAS)}")
            on_no_index = target == "recoup" and "--find-links" not in line and " @ " not in spec
            if on_no_index:
                wrong.append(f"{page}: {line}: recoup is on no index")
    assert wrong == []


def test_the_documented_wheel_builds_with_the_extras(tmp_path: Path) -> None:
    """`python -m pip wheel --no-deps . -w dist` gives the wheel the docs install by name."""
    page = (ROOT / "docs" / "getting-started.md").read_text("utf-8")
    assert "python -m pip wheel --no-deps . -w dist" in page
    (named,) = re.findall(r"'dist/(recoup-[^']+\.whl)\[django\]'", page)
    assert named == f"recoup-{PYPROJECT['project']['version']}-py3-none-any.whl"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", str(ROOT), "-w", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    wheel = tmp_path / named
    assert wheel.exists(), sorted(p.name for p in tmp_path.iterdir())
    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read(f"recoup-{PYPROJECT['project']['version']}.dist-info/METADATA")
    extras = Parser().parsestr(metadata.decode()).get_all("Provides-Extra") or []
    assert {"django", "postgres", "api", "stripe", "all"} <= set(extras)
