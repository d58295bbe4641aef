"""MkDocs hook: the pages generated from the code, at build time, so they cannot go stale.

A page holding `<!-- generated: cli -->` gets every `recoup` command's own `--help` there; one
holding `<!-- generated: openapi -->` gets the HTTP API's OpenAPI document (the app's
`openapi()`, the document `/openapi.json` serves) as Markdown. Each is produced by running this
file as a script in a fresh interpreter (plain help needs `TYPER_USE_RICH=0` before Typer is
imported; the app is built over a temporary SQLite file, so no database server is needed), with
the repository first on the path, so the page shows the code being built.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
MARKERS = {"cli": "<!-- generated: cli -->", "openapi": "<!-- generated: openapi -->"}
HELP_WIDTH = 100
_cache: dict[str, str] = {}


# --- the hook ------------------------------------------------------------------------------


def on_pre_build(config: Any, **_: Any) -> None:
    _cache.clear()  # `mkdocs serve` rebuilds: read the code again


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any, **_: Any) -> str:
    for kind, marker in MARKERS.items():
        if marker in markdown:
            if kind not in _cache:
                _cache[kind] = generate(kind)
            markdown = markdown.replace(marker, _cache[kind])
    return markdown


def generate(kind: str) -> str:
    """The Markdown of `kind` ("cli" or "openapi"), made in a fresh interpreter."""
    env = os.environ | {
        "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
        "TYPER_USE_RICH": "0",
        "NO_COLOR": "1",
    }
    done = subprocess.run(
        [sys.executable, __file__, kind],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        raise RuntimeError(f"generating the {kind} reference failed:\n{done.stderr}")
    return done.stdout


# --- the CLI reference ---------------------------------------------------------------------


def cli_markdown() -> str:
    import typer
    from typer import _click as click  # Typer ≥ 0.26 vendors click (see recoup.cli)

    from recoup.cli import load_commands

    out: list[str] = []

    def walk(command: Any, path: list[str], parent: Any) -> None:
        ctx = click.Context(
            command,
            info_name=path[-1],
            parent=parent,
            max_content_width=HELP_WIDTH,
            terminal_width=HELP_WIDTH,
        )
        name = " ".join(path)
        level = "#" * min(len(path) + 1, 4)
        out.append(f"{level} `{name}` {{#{slug(name)}}}\n\n```text\n{command.get_help(ctx)}\n```\n")
        if hasattr(command, "list_commands"):
            for sub in command.list_commands(ctx):
                found = command.get_command(ctx, sub)
                if found is not None and not getattr(found, "hidden", False):
                    walk(found, [*path, sub], ctx)

    walk(typer.main.get_command(load_commands()), ["recoup"], None)
    return "\n".join(out)


# --- the HTTP API reference ----------------------------------------------------------------


def openapi_document() -> dict[str, Any]:
    from recoup.api.app import create_app
    from recoup.storage import open_store
    from recoup.timekeeping.clock import SystemClock

    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:///{Path(tmp) / 'openapi.db'}")
        try:
            return create_app(store, clock=SystemClock()).openapi()
        finally:
            store.close()


def openapi_markdown(doc: dict[str, Any]) -> str:
    out = [
        f"OpenAPI {doc['openapi']}, *{doc['info']['title']}* {doc['info']['version']}: "
        f"{doc['info'].get('description', '')}\n"
    ]
    by_tag: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            tag = (operation.get("tags") or ["operations"])[0]
            by_tag.setdefault(tag, []).append((method.upper(), path, operation))
    for tag, operations in by_tag.items():
        out.append(f"## {tag} {{#tag-{slug(tag)}}}\n")
        out.append("| operation | summary |\n|---|---|")
        for method, path, operation in operations:
            anchor = slug(f"{method} {path}")
            out.append(f"| [`{method} {path}`](#{anchor}) | {cell(operation.get('summary', ''))} |")
        out.append("")
        for method, path, operation in operations:
            out.append(_operation(method, path, operation))
    out.append("## Schemas {#schemas}\n")
    for name, schema in doc.get("components", {}).get("schemas", {}).items():
        out.append(_schema(name, schema))
    return "\n".join(out)


def _operation(method: str, path: str, operation: dict[str, Any]) -> str:
    lines = [f"### `{method} {path}` {{#{slug(f'{method} {path}')}}}\n"]
    if operation.get("summary"):
        lines.append(f"**{operation['summary']}**\n")
    if operation.get("description"):
        lines.append(f"{operation['description'].strip()}\n")
    parameters = operation.get("parameters", [])
    if parameters:
        lines.append("| parameter | in | type | required | description |\n|---|---|---|---|---|")
        for p in parameters:
            lines.append(
                f"| `{p['name']}` | {p['in']} | {type_of(p.get('schema', {}))} "
                f"| {'yes' if p.get('required') else 'no'} "
                f"| {cell(_described(p.get('description'), p.get('schema', {})))} |"
            )
        lines.append("")
    body = operation.get("requestBody")
    if body:
        media = ", ".join(
            f"`{m}` {type_of(c.get('schema', {}))}" for m, c in body["content"].items()
        )
        needed = "required" if body.get("required") else "optional"
        lines.append(f"Request body ({needed}): {media}\n")
    responses = operation.get("responses", {})
    if responses:
        lines.append("| status | description | body |\n|---|---|---|")
        for code, response in responses.items():
            content = response.get("content", {})
            shown = ", ".join(f"`{m}` {type_of(c.get('schema', {}))}" for m, c in content.items())
            lines.append(f"| {code} | {cell(response.get('description', ''))} | {shown} |")
        lines.append("")
    return "\n".join(lines)


def _schema(name: str, schema: dict[str, Any]) -> str:
    lines = [f"### {name} {{#schema-{slug(name)}}}\n"]
    if schema.get("description"):
        lines.append(f"{schema['description'].strip()}\n")
    properties = schema.get("properties", {})
    if properties:
        required = set(schema.get("required", []))
        lines.append("| field | type | required | description |\n|---|---|---|---|")
        for field, prop in properties.items():
            lines.append(
                f"| `{field}` | {type_of(prop)} | {'yes' if field in required else 'no'} "
                f"| {cell(_described(None, prop))} |"
            )
        lines.append("")
    else:
        lines.append(f"Type: {type_of(schema)}\n")
    return "\n".join(lines)


LIMITS = {
    "minimum": "≥ {}",
    "exclusiveMinimum": "> {}",
    "maximum": "≤ {}",
    "exclusiveMaximum": "< {}",
    "minLength": "at least {} characters",
    "maxLength": "at most {} characters",
    "minItems": "at least {} items",
    "maxItems": "at most {} items",
    "maxProperties": "at most {} keys",
    "pattern": "matching `{}`",
}


def _described(description: str | None, schema: dict[str, Any]) -> str:
    """A field's description, then what the schema states of its values."""
    said = [description or schema.get("description") or ""]
    stated = [form.format(schema[key]) for key, form in LIMITS.items() if key in schema]
    if "default" in schema and schema["default"] is not None:
        stated.append(f"default `{json.dumps(schema['default'])}`")
    if stated:
        said.append(f"({'; '.join(stated)})")
    return " ".join(s for s in said if s)


def type_of(schema: dict[str, Any]) -> str:
    """A JSON schema in a few words, names of components linked to their section."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#schema-{slug(name)})"
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " or ".join(type_of(s) for s in schema[key])
    if "allOf" in schema:
        return " and ".join(type_of(s) for s in schema["allOf"])
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    if "enum" in schema:
        return " or ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " or ".join(type_of({**schema, "type": k}) for k in kind)
    if kind == "array":
        return f"array of {type_of(schema.get('items', {}))}"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return f"object of {type_of(schema['additionalProperties'])}"
    if kind is None:
        return "any"
    return f"{kind} ({schema['format']})" if "format" in schema else str(kind)


def cell(text: str) -> str:
    """Text fit for one table cell: on one line, its pipes escaped (those in code spans are
    not separators to Python-Markdown, and an escape there would show)."""
    parts = " ".join(text.split()).split("`")
    return "`".join(part if i % 2 else part.replace("|", "\\|") for i, part in enumerate(parts))


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


if __name__ == "__main__":
    match sys.argv[1:]:
        case ["cli"]:
            sys.stdout.write(cli_markdown())
        case ["openapi"]:
            sys.stdout.write(openapi_markdown(openapi_document()))
        case _:
            sys.exit("usage: reference.py cli|openapi")
