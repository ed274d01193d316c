"""What a decider sends with a decision (edited args, resume data), checked as far as it can be before
anything is claimed: it must be storable, and an edit may name only keys the tool reads (and takes the
place of the model's value for each field it names).

A decider's input is stored with the run and in its audit log, so it gets the same checks as a model's
output (``troupe.core.vocabulary.storable``): data nested deeper than those allow would be written, then
fail every read of the run and of its audit log.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import AliasChoices, AliasPath, BaseModel
from troupe.core.vocabulary.errors import DecisionRejectedError
from troupe.core.vocabulary.state import ToolCallState
from troupe.core.vocabulary.storable import args_problem


def refuse_unstorable(what: str, call: ToolCallState, value: Any, error: type[DecisionRejectedError]) -> None:
    """Raise ``error`` if ``value`` (``what``: "edited args", "resume data") cannot be stored: nested
    too deep, too large, not JSON (a Python object) or not valid Unicode."""
    problem = args_problem(value)
    if problem is not None:
        raise error(
            f"{what} for tool {call.tool_name!r} cannot be stored with the run: {problem}",
            tool_call_id=call.tool_call_id,
        )


def unknown_keys(schema: type[BaseModel], keys: Iterable[str]) -> list[str]:
    """The keys ``schema`` would drop without a word (pydantic's default ``extra="ignore"``): the name
    of none of its fields as it reads them, by name or by alias. None for a schema that keeps extra
    keys (``extra="allow"``): it hands them to the tool."""
    if schema.model_config.get("extra") == "allow":
        return []
    known = field_keys(schema)
    return [key for key in keys if key not in known]


def edit_over(schema: type[BaseModel], args: dict[str, Any], edited: dict[str, Any]) -> dict[str, Any]:
    """The model's args with the edit over them, field by field: a key of ``args`` that sets a field
    the edit sets under another key (an alias, or its name) goes, or the schema might read the model's
    value and drop the edit."""
    keys = field_keys(schema)
    edited_fields = {keys.get(key, key) for key in edited}
    kept = {key: value for key, value in args.items() if keys.get(key, key) not in edited_fields}
    return {**kept, **edited}


def field_keys(schema: type[BaseModel]) -> dict[str, str]:
    """Each top-level key ``schema`` reads, by name or by alias as its config says, and the field it
    sets."""
    config = schema.model_config
    by_name = bool(config.get("validate_by_name") or config.get("populate_by_name"))
    by_alias = config.get("validate_by_alias", True) is not False
    keys: dict[str, str] = {}
    for name, field in schema.model_fields.items():
        aliases = _aliases(field.validation_alias if field.validation_alias is not None else field.alias)
        if by_alias:
            keys.update(dict.fromkeys(aliases, name))
        if by_name or not by_alias or not aliases:
            keys[name] = name
    return keys


def _aliases(alias: str | AliasPath | AliasChoices | None) -> set[str]:
    """The top-level keys an alias reads (an alias path starts with one)."""
    if alias is None:
        return set()
    if isinstance(alias, str):
        return {alias}
    if isinstance(alias, AliasPath):
        return {alias.path[0]} if isinstance(alias.path[0], str) else set()
    return set().union(*(_aliases(choice) for choice in alias.choices))


__all__ = ["edit_over", "field_keys", "refuse_unstorable", "unknown_keys"]
