"""Tools and pauses described by a JSON schema instead of a pydantic model.

A tool from outside (an MCP server's) states its input as a JSON schema, and a tool may pause with a
schema of its own for the answer (an MCP elicitation's requested schema). ``json_schema_input`` turns an
input schema into the pydantic model class a ``Tool`` takes, so validation and the spec the model sees
go the same way as for any tool; ``schema_problem`` and ``instance_errors`` check schemas and data.

Schemas from outside are hostile input: they are checked against JSON Schema's own meta-schema, bounded
in size and depth, and data is checked against them without fetching any ``$ref`` from anywhere.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from pydantic import BaseModel, RootModel, model_validator

# A schema bigger or deeper than this is refused (a tool's or an elicitation's; real ones are far smaller).
MAX_SCHEMA_BYTES = 256 * 1024
MAX_SCHEMA_DEPTH = 32


def _depth(value: Any, limit: int) -> int:
    """How deep ``value`` nests (stops counting past ``limit``)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if level > limit:
            return level
        if isinstance(item, dict):
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, level + 1) for v in item)
    return deepest


def schema_problem(schema: Any, *, object_only: bool = True) -> str | None:
    """What is wrong with ``schema`` as a JSON schema for an object (None if nothing is)."""
    if not isinstance(schema, dict):
        return f"a schema must be a JSON object, got {type(schema).__name__}"
    if object_only and schema.get("type") != "object":
        return f"the schema must describe an object (type: object), got type {schema.get('type')!r}"
    try:
        size = len(json.dumps(schema, allow_nan=False))
    except (TypeError, ValueError) as exc:
        return f"the schema is not JSON: {exc}"
    if size > MAX_SCHEMA_BYTES:
        return f"the schema is {size} bytes, over the {MAX_SCHEMA_BYTES} allowed"
    if _depth(schema, MAX_SCHEMA_DEPTH) > MAX_SCHEMA_DEPTH:
        return f"the schema nests deeper than {MAX_SCHEMA_DEPTH} levels"
    from jsonschema import exceptions, validators

    try:
        validators.validator_for(schema, default=validators.Draft202012Validator).check_schema(schema)
    except exceptions.SchemaError as exc:
        return f"not a valid JSON schema: {exc.message}"
    return None


def instance_errors(schema: dict[str, Any], data: Any) -> list[str]:
    """Where ``data`` breaks ``schema`` (empty if it fits). ``$ref``s resolve only inside the schema."""
    from jsonschema import validators
    from referencing import Registry

    # A registry that knows nothing: a $ref to anywhere outside the schema fails instead of fetching.
    cls = validators.validator_for(schema, default=validators.Draft202012Validator)
    validator = cls(schema, registry=Registry())
    return [
        f"{'/'.join(str(p) for p in error.absolute_path) or 'value'}: {error.message}"
        for error in sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
    ][:20]


class JsonSchemaInput(RootModel[dict[str, Any]]):
    """A tool input validated against a JSON schema (``json_schema_input`` makes one class per schema).
    ``root`` is the arguments as given; the model sees ``SCHEMA`` as the tool's parameters."""

    SCHEMA: ClassVar[dict[str, Any]] = {"type": "object"}

    @model_validator(mode="before")
    @classmethod
    def _fits_schema(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            raise ValueError(f"the arguments must be a JSON object, got {type(data).__name__}")
        errors = instance_errors(cls.SCHEMA, data)
        if errors:
            raise ValueError("; ".join(errors))
        return data

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return dict(cls.SCHEMA)


def json_schema_input(name: str, schema: dict[str, Any]) -> type[BaseModel]:
    """The input model of a tool whose input ``schema`` is a JSON schema (check it with
    ``schema_problem`` first)."""
    return type(f"{name}Input", (JsonSchemaInput,), {"SCHEMA": schema, "__module__": __name__})


__all__ = [
    "MAX_SCHEMA_BYTES",
    "MAX_SCHEMA_DEPTH",
    "JsonSchemaInput",
    "instance_errors",
    "json_schema_input",
    "schema_problem",
]
