"""MCP servers an agent takes tools from: plain, picklable data (an ``AgentSpec`` travels to Ray actors).

``MCPStdio`` runs a server as a child process of the agent's host and speaks over its stdin/stdout;
``MCPHttp`` reaches one over streamable HTTP. Nothing here imports ``mcp``: the sessions live in the
actors layer (``troupe.actors.mcp``), opened by each agent host for itself.

``require_approval`` decides which of a server's tools pause for a person before they run:
- ``None`` (default): the tool's annotations decide, as MCP means them: a tool is gated unless it says
  ``readOnlyHint: true`` (``destructiveHint`` defaults to true in MCP);
- ``True`` / ``False``: every tool of the server, or none;
- ``{"always": [names], "never": [names]}``: those tools (by the server's own names); the others as with
  ``None``;
- a function ``(tool_name, args) -> bool`` (sync or async) for each call; one that raises gates the call.
A run's ``require_tool_approval=True`` still gates every call, and a run-level function decides the
calls that no rule here gates, as for any tool.

``timeout_s`` (default 300) bounds how long a call of the server's tools waits for the server's next
message (its answer, or an elicitation); past it the call fails with a tool error the model sees, and
the server is sent ``notifications/cancelled`` for it. Each of its tools carries it
(``troupe.actors.mcp.tools.MCPCall.timeout_s``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from troupe.core.vocabulary.names import NAME_RULE, name_problem
from troupe.core.vocabulary.seconds import check_seconds

McpApprovalRule = (
    bool | Mapping[str, Sequence[str]] | Callable[[str, dict[str, Any]], bool | Awaitable[bool]] | None
)

_RULE_KEYS = frozenset({"always", "never"})


def _check_common(kind: str, name: Any, require_approval: Any, prefix: Any, timeout_s: Any) -> None:
    if not isinstance(name, str) or not name or len(name) > 64:
        raise ValueError(f"{kind}: name must be a non-empty string of at most 64 characters, got {name!r}")
    if not isinstance(prefix, str):
        raise TypeError(f"{kind} {name!r}: prefix must be a string")
    # The prefix starts each of its tools' names: one outside the rule would have every tool left out.
    if prefix and name_problem(prefix + "_") is not None:
        raise ValueError(
            f"{kind} {name!r}: prefix {prefix[:80]!r} goes before each of its tools' names, which the model "
            f"calls them by, so it must be at most 63 {NAME_RULE.removeprefix('1-64 ')}"
        )
    check_seconds(timeout_s, f"{kind} {name!r}: timeout_s")
    check_approval_rule(f"{kind} {name!r}", require_approval)


def check_approval_rule(where: str, rule: Any) -> None:
    """Refuse a ``require_approval`` that is none of the forms above, naming what is wrong."""
    if rule is None or isinstance(rule, bool) or callable(rule):
        return
    if not isinstance(rule, Mapping):
        raise TypeError(
            f"{where}: require_approval must be a bool, {{'always': [...], 'never': [...]}} or a function "
            f"(tool_name, args) -> bool, got {type(rule).__name__}"
        )
    unknown = set(rule) - _RULE_KEYS
    if unknown:
        raise ValueError(f"{where}: require_approval takes only 'always' and 'never', not {sorted(unknown)}")
    lists = {key: rule[key] for key in _RULE_KEYS if key in rule}
    for key, names in lists.items():
        if isinstance(names, str) or not all(isinstance(n, str) for n in names):
            raise TypeError(f"{where}: require_approval[{key!r}] must be a list of tool names")
    both = set(lists.get("always", ())) & set(lists.get("never", ()))
    if both:
        raise ValueError(f"{where}: tools both 'always' and 'never' gated: {sorted(both)}")


@dataclass(frozen=True)
class MCPStdio:
    """An MCP server started as ``command args...`` by each agent host that uses it, ending with that host.

    Give it to ``Agent(mcp_servers=[...])``: its tools become the agent's, with the same approval rules,
    fingerprints, audit and recovery as any other tool. It gets no environment of the host's beyond the
    basics the MCP SDK passes (``HOME``, ``LOGNAME``, ``PATH``, ``SHELL``, ``TERM``, ``USER``).

    Args:
        name: The server's name (at most 64 characters), shown to people deciding its calls.
        command: The program to start.
        args: Its arguments.
        env: Its environment, secrets included (never shown in reprs or logs).
        cwd: Its working folder (default: the host's).
        require_approval: Which of its tools wait for a person: True or False for all; ``{"always":
            [...], "never": [...]}`` by the server's tool names; or a function ``(tool_name, args) ->
            bool``. Default None: the tool's annotations say (gated unless ``readOnlyHint: true``).
        prefix: Put before its tools' names (to keep two servers' names apart).
        timeout_s: How long one call may take, in seconds (default 300).

    Raises:
        ValueError: An empty name or command, or a timeout that is not a positive number.
        TypeError: ``args`` or ``env`` that are not strings.

    Example:
        >>> files = MCPStdio("files", "npx", ["-y", "@modelcontextprotocol/server-filesystem", "/data"],
        ...                  require_approval={"never": ["read_file", "list_directory"]})
        >>> agent = Agent("clerk", model=model, mcp_servers=[files])
    """

    name: str
    command: str
    args: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    cwd: str | None = None
    require_approval: McpApprovalRule = None
    prefix: str = ""
    timeout_s: float = 300.0

    def __post_init__(self) -> None:
        _check_common("MCPStdio", self.name, self.require_approval, self.prefix, self.timeout_s)
        if not isinstance(self.command, str) or not self.command:
            raise ValueError(f"MCPStdio {self.name!r}: command must be a non-empty string")
        if isinstance(self.args, str) or not all(isinstance(a, str) for a in self.args):
            raise TypeError(f"MCPStdio {self.name!r}: args must be a list of strings")
        if not isinstance(self.env, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in self.env.items()
        ):
            raise TypeError(f"MCPStdio {self.name!r}: env must map strings to strings")
        object.__setattr__(self, "args", tuple(self.args))
        object.__setattr__(self, "env", dict(self.env))


@dataclass(frozen=True)
class MCPHttp:
    """An MCP server reached over streamable HTTP, by every agent host that uses it.

    Args:
        name: The server's name (at most 64 characters), shown to people deciding its calls.
        url: Its URL (``http://`` or ``https://``, without credentials: put those in ``headers``).
        headers: Sent with every request (an API key, say: never shown in reprs, logs or errors).
        require_approval: Which of its tools wait for a person, as ``MCPStdio`` takes it.
        prefix: Put before its tools' names.
        timeout_s: How long one call may take, in seconds (default 300).

    Raises:
        ValueError: A bad name, a URL that is not http(s) or carries credentials, or a bad timeout.
        TypeError: Headers that are not strings.

    Example:
        >>> tickets = MCPHttp("tickets", "https://mcp.example.com/mcp",
        ...                   headers={"Authorization": f"Bearer {token}"})
    """

    name: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    require_approval: McpApprovalRule = None
    prefix: str = ""
    timeout_s: float = 300.0

    def __post_init__(self) -> None:
        _check_common("MCPHttp", self.name, self.require_approval, self.prefix, self.timeout_s)
        parts = urlsplit(self.url) if isinstance(self.url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"MCPHttp {self.name!r}: url must be an http:// or https:// URL")
        if parts.username or parts.password:
            raise ValueError(f"MCPHttp {self.name!r}: put credentials in headers, not in the url")
        if not isinstance(self.headers, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in self.headers.items()
        ):
            raise TypeError(f"MCPHttp {self.name!r}: headers must map strings to strings")
        object.__setattr__(self, "headers", dict(self.headers))


MCPServer = MCPStdio | MCPHttp


def check_mcp_servers(agent_id: str, servers: Sequence[MCPServer] | None) -> tuple[MCPServer, ...]:
    """The agent's servers, each an ``MCPStdio`` or ``MCPHttp``, names unique."""
    if servers is None:
        return ()
    if isinstance(servers, MCPStdio | MCPHttp):
        servers = [servers]
    seen: set[str] = set()
    for server in servers:
        if not isinstance(server, MCPStdio | MCPHttp):
            raise TypeError(f"agent {agent_id!r}: mcp_servers takes MCPStdio or MCPHttp, got {server!r}")
        if server.name in seen:
            raise ValueError(f"agent {agent_id!r}: two MCP servers named {server.name!r}")
        seen.add(server.name)
    return tuple(servers)


__all__ = ["MCPHttp", "MCPServer", "MCPStdio", "McpApprovalRule", "check_approval_rule", "check_mcp_servers"]
