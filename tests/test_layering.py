"""The layering of ARCHITECTURE.md as a test: every module of the package may import only the
layers its own layer may depend on, so a wrong-way import fails here, naming the rule.

Imports inside functions and under `TYPE_CHECKING` count too: a lazy import is still a
dependency, and a type-only one still ties a layer to another's names."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import recoup

PACKAGE = Path(recoup.__file__).parent
# What every layer may import: the exceptions, the lazy package exports, and pure time.
PURE = {"errors", "lazy", "timekeeping"}

# What each top-level part of `recoup` may import (besides itself). ARCHITECTURE.md, "Layers".
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "lazy": set(),  # package exports that load their module on first use
    "timekeeping": {"errors", "lazy"},
    "dunning": PURE,
    "idempotency": PURE,
    "jobs": PURE,
    "tenancy": PURE | {"jobs"},
    "sealed": PURE,  # secrets at rest: sealed with a key kept outside the database
    "payments": PURE | {"dunning"},
    "analytics": PURE | {"dunning"},
    "messages": PURE | {"dunning"},  # customer emails: which, when, in which words; the token
    "recovery": PURE
    | {"dunning", "jobs", "idempotency", "payments", "analytics", "tenancy", "sealed"}
    | {"messages"},
    "storage": PURE | {"dunning", "jobs", "idempotency", "recovery", "tenancy", "messages"},
    "receiver": PURE | {"payments", "idempotency", "messages"},  # messages: the update token
    "contrib": PURE
    | {"payments", "idempotency", "receiver", "messages"}  # in frameworks
    | {"client"},  # access_of reads a customer's access through the Python client
    # The HTTP API's request and response models, shared by the app and the Python client;
    # they convert from the records of the layers below (and the store's cursor format).
    "wire": PURE
    | {"dunning", "jobs", "idempotency", "analytics", "recovery", "storage", "messages"},
    "api": PURE
    | {"dunning", "jobs", "idempotency", "payments", "analytics", "tenancy", "recovery"}
    | {"storage", "sealed", "wire", "messages"},
    "client": PURE | {"wire"},  # the SDK reads the API's models from `wire`, never `recoup.api`
    "demo": PURE  # an edge, like the CLI: it chooses a backend (a fresh SQLite file)
    | {"dunning", "jobs", "idempotency", "payments", "analytics", "tenancy", "recovery"}
    | {"storage", "sealed", "messages"},
    "logs": PURE,  # the long-running commands' log format, chosen at the edge
    "cli": PURE
    | {"dunning", "jobs", "idempotency", "payments", "analytics", "tenancy", "recovery"}
    | {"storage", "api", "demo", "logs", "sealed", "messages"}  # `recoup serve` serves …
    | {"receiver"}  # `recoup listen` checks signatures as a user's receiver would
    | {"wire"}  # commands that print what the API answers print it in the API's shapes
    | {"client"},  # `--url`: the read and operation commands against a remote server
    "__main__": {"cli"},
    "__init__": {"jobs", "storage", "dunning", "recovery", "timekeeping", "errors", "lazy"},
}
# The edges: what a user runs or imports to reach Recoup from outside (HTTP, the command line, the
# Python SDK, the demo, the receiver library and its frameworks). No edge imports another edge,
# so each can change, or be left out of an install, without the others; but these, each for its
# reason (ARCHITECTURE.md, 'Layers').
EDGES = {"api", "cli", "client", "demo", "contrib", "receiver"}
EDGE_EXCEPTIONS: dict[tuple[str, str], str] = {
    ("cli", "api"): "`recoup serve` serves the app",
    ("cli", "demo"): "`recoup demo` runs the demo",
    ("cli", "receiver"): "`recoup listen` checks signatures as a user's receiver would",
    ("cli", "client"): "`--url` runs the read and operation commands on a remote server's API",
    ("contrib", "receiver"): "the framework integrations are the receiver inside a framework",
    ("contrib", "client"): "`access_of` asks Recoup's API through the Python client",
}
# Modules at the top of the package that belong to a layer of their own name.
ALIASES = {
    "tenancy": "tenancy",
}


def layer_of(module: str) -> str:
    """`recoup.jobs.worker` → `jobs`; `recoup.client.dunning` → `client`."""
    top = module.split(".")[1] if module.count(".") else "__init__"
    return ALIASES.get(top, top)


def imported(tree: ast.AST, module: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, absolute module) of every `recoup` import in the tree, relative ones resolved."""
    found: list[tuple[int, str]] = []
    base = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("recoup")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parent = base[: len(base) - node.level + 1]
                target = ".".join([*parent, node.module] if node.module else parent)
            else:
                target = node.module or ""
            if target == "recoup" or target.startswith("recoup."):
                if target == "recoup":  # `from recoup import cli`, or a name of the root
                    found += [
                        (node.lineno, f"recoup.{a.name}")
                        for a in node.names
                        if (PACKAGE / a.name).is_dir() or (PACKAGE / f"{a.name}.py").is_file()
                    ]
                else:
                    found.append((node.lineno, target))
    return found


def violations(source: str, module: str, *, is_package: bool = False) -> list[str]:
    """Every import of `source` (the text of `module`) that its layer may not make."""
    layer = layer_of(module)
    allowed = ALLOWED[layer] | {layer}
    broken = []
    for line, target in imported(ast.parse(source), module, is_package):
        if target == "recoup":
            continue
        other = layer_of(target)
        if layer in EDGES and other in EDGES - {layer} and (layer, other) not in EDGE_EXCEPTIONS:
            broken.append(
                f"{module}:{line} imports {target}: no edge imports another edge ({layer!r} → "
                f"{other!r} is not among EDGE_EXCEPTIONS) (ARCHITECTURE.md, 'Layers')"
            )
        elif other not in allowed:
            broken.append(
                f"{module}:{line} imports {target}: the {layer!r} layer may import only "
                f"{sorted(ALLOWED[layer]) or 'nothing else'} (ARCHITECTURE.md, 'Layers')"
            )
    return broken


def modules() -> list[tuple[str, Path]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found.append((".".join(parts), path))
    return found


def test_every_part_of_the_package_has_a_layer() -> None:
    tops = {layer_of(m) for m, _ in modules()}
    assert tops <= set(ALLOWED), f"give these a layer in ALLOWED: {sorted(tops - set(ALLOWED))}"


def test_no_edge_may_import_another_edge_but_the_sanctioned_exceptions() -> None:
    for edge in sorted(EDGES):
        others = ALLOWED[edge] & (EDGES - {edge})
        unsanctioned = {other for other in others if (edge, other) not in EDGE_EXCEPTIONS}
        assert not unsanctioned, f"{edge!r} may not import the edges {sorted(unsanctioned)}"
    for (edge, other), reason in EDGE_EXCEPTIONS.items():
        assert edge in EDGES and other in EDGES and reason
        assert other in ALLOWED[edge], f"a stale exception: {edge!r} no longer imports {other!r}"


@pytest.mark.parametrize(("module", "path"), modules(), ids=[m for m, _ in modules()])
def test_the_module_imports_only_the_layers_below_it(module: str, path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    assert violations(source, module, is_package=path.name == "__init__.py") == []


@pytest.mark.parametrize(
    ("module", "source", "rule"),
    [
        ("recoup.dunning.planner", "from recoup.jobs.model import Job", "'dunning' layer"),
        ("recoup.timekeeping.zones", "import recoup.dunning.policy", "'timekeeping' layer"),
        ("recoup.jobs.worker", "def f():\n    from recoup.api import app", "'jobs' layer"),
        ("recoup.storage.sqlite.store", "from ...api.tokens import x", "'storage' layer"),
        ("recoup.recovery.service", "from recoup.cli import main", "'recovery' layer"),
        ("recoup.client.dunning", "from recoup.api.app import create_app", "no edge imports"),
        ("recoup.client.shapes", "from ..api.schemas import JobIn", "no edge imports"),
        ("recoup.api.routes.jobs", "from recoup.cli import main", "no edge imports"),
        ("recoup.api.app", "def f():\n    import recoup.cli.serve", "no edge imports"),
        ("recoup.demo.run", "from recoup.client import Client", "no edge imports"),
    ],
)
def test_a_wrong_way_import_fails_naming_the_rule(module: str, source: str, rule: str) -> None:
    (found,) = violations(source, module)
    assert rule in found and "ARCHITECTURE.md" in found


def test_an_import_the_rules_allow_passes() -> None:
    assert violations("from recoup.dunning.planner import plan_retries", "recoup.recovery.x") == []
    assert violations("from .planner import plan_retries", "recoup.dunning.lifecycle") == []
