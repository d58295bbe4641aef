"""How a request model states, in the OpenAPI document, a rule that a validator beside it
enforces: keywords added to a type's JSON Schema (`Stated`), a schema taken from another type
(`StatedAs`), and "exactly one of these fields" (`one_of`).

The server keeps its own checks (they answer with a readable message naming the field, where a
pydantic `pattern` would quote the whole regular expression); these make the document say the
same thing, so that what a client generated from it sends is what the server accepts.
"""

from __future__ import annotations

from typing import Any

from pydantic import GetJsonSchemaHandler, TypeAdapter
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, core_schema


class Stated:
    """JSON Schema keywords merged into the schema of the type this annotates (a keyword
    given as None is removed).

    On a dict, `propertyNames` states the rule for names, and the value schema pydantic put
    under `patternProperties` (which would let any other name through) becomes
    `additionalProperties`."""

    def __init__(self, **keywords: Any) -> None:
        self.keywords = keywords

    def __get_pydantic_json_schema__(
        self, schema_of_type: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = handler(schema_of_type)
        if "propertyNames" in self.keywords and "patternProperties" in schema:
            (values,) = schema.pop("patternProperties").values()
            schema["additionalProperties"] = values
        for keyword, value in self.keywords.items():
            if value is None:
                schema.pop(keyword, None)
            else:
                schema[keyword] = value
        return schema


class StatedAs:
    """The JSON Schema of `stated` (a named type, such as an enum or a recursive
    `TypeAliasType`, which becomes one component of the document, referenced wherever it is
    stated) for a field validated as the type it annotates."""

    def __init__(self, stated: Any) -> None:
        schema = TypeAdapter(stated).core_schema
        if "ref" in schema:  # a named type: stated as a reference to its definition
            schema = core_schema.definitions_schema(
                core_schema.definition_reference_schema(schema["ref"]), [schema]
            )
        self.schema = schema

    def __get_pydantic_json_schema__(
        self, _: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return handler(self.schema)


def one_of(*branches: dict[str, str]) -> dict[str, Any]:
    """The JSON Schema of "exactly one of these sets of fields": each branch maps the fields it
    requires (present and not null) to their JSON type, and also names (type "null") the fields
    it requires absent or null. `one_of({"run_at": "string"}, {"delay_seconds": "number"})`
    allows one of the two and refuses both or neither, as `ExactlyOne` does on the server."""
    return {
        "oneOf": [
            {
                "required": [name for name, kind in branch.items() if kind != "null"],
                "properties": {name: {"type": kind} for name, kind in branch.items()},
            }
            for branch in branches
        ]
    }


__all__ = ["Stated", "StatedAs", "one_of"]
