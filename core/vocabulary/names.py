"""The one rule for the names a model is handed: tool names, and agent ids.

OpenAI's API takes only function names matching ``^[a-zA-Z0-9_-]{1,64}$`` and Anthropic's the same, so
a name outside it is accepted here and refused by the provider with a 400 at the first real run. Every
name Troupe hands a model is held to it: ``create_tool`` ids and the keys of a tools dict, subagents'
``agent-<key>`` tools (so A2A agents' too), and an MCP server's tools (those outside it are left out).
Agent ids keep it too: Troupe's MCP server offers each agent as a tool by its id, and an id within it is
one URL path segment as it is (``/api/agents/{agentId}``, ``/a2a/{agent}``), where a ``/`` could never be.
Some OpenAI-compatible servers also take dots; the rule leaves them out so that one name works with every
provider.
"""

from __future__ import annotations

import re
from typing import Any

NAME_RULE = "1-64 letters, digits, '_' or '-'"
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def name_problem(name: Any) -> str | None:
    """Why ``name`` cannot be a name a model is handed (None: it can)."""
    # fullmatch: ``$`` alone would let a trailing newline through.
    if isinstance(name, str) and _NAME.fullmatch(name):
        return None
    shown = repr(name[:80]) if isinstance(name, str) else repr(name)[:80]
    return f"{shown} is not {NAME_RULE}"


__all__ = ["NAME_RULE", "name_problem"]
