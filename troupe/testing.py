"""Deterministic models for tests and demos: ``ScriptedModel``, ``FunctionModel``, ``text``, ``tool_call``."""

from troupe.core.models.testing import (
    CallLog,
    FunctionModel,
    ScriptedModel,
    ScriptedModelExhaustedError,
    last_tool_message,
    text,
    tool_call,
)

__all__ = [
    "CallLog",
    "FunctionModel",
    "ScriptedModel",
    "ScriptedModelExhaustedError",
    "last_tool_message",
    "text",
    "tool_call",
]
