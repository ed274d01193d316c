"""Troupe: an actor-model multi-agent runtime with human-in-the-loop tool approval.

This package is the public face: it re-exports what users need and nothing inside the project imports it.
``troupe.__version__`` is the installed version (of the ``troupe-runtime`` distribution). Names load on
first use (PEP 562), so ``import troupe``, ``troupe.client``, ``troupe.errors`` and
``troupe.testing`` (each also an attribute of ``troupe``) stay Ray-free; touching ``Runtime`` or
``Agent`` is what imports Ray.
"""

from __future__ import annotations

# Imported under private names: ``dir(troupe)`` is the public API and nothing else.
import importlib as _importlib
import os as _os
import typing as _typing

# Imported from a checkout of the repository (its root is the working directory, which comes first on
# sys.path, so it shadows any installed Troupe): the layer folders (core/, api/, ...) sit beside this one,
# so they are searched as this package's subpackages, which is what installing maps them to. An installed
# or editable Troupe never takes this path.
_CHECKOUT = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if _os.path.isfile(_os.path.join(_CHECKOUT, "pyproject.toml")) and _os.path.isdir(
    _os.path.join(_CHECKOUT, "core")
):
    __path__.append(_CHECKOUT)

if _typing.TYPE_CHECKING:
    from troupe import client, errors, testing
    from troupe.actors.a2a.agent import A2AAgent
    from troupe.core.deciding.approvers import ApproverPolicy
    from troupe.core.models.openai_model import OpenAIModel
    from troupe.core.notifying.links import LinkSigner
    from troupe.core.notifying.outbox import Notifications, NotificationTarget, RetrySchedule
    from troupe.core.run.memory import Memory
    from troupe.core.vocabulary.chunks import Chunk
    from troupe.core.vocabulary.hooks import Hooks, ToolCallOverride
    from troupe.core.vocabulary.identity import Principal
    from troupe.core.vocabulary.mcp_servers import MCPHttp, MCPStdio
    from troupe.core.vocabulary.model import Model
    from troupe.core.vocabulary.results import RunResult, StepResult
    from troupe.core.vocabulary.stream import AgentStream
    from troupe.core.vocabulary.suspended import DelegatedBy, PendingToolCall, SuspendedRun, SuspendedRunList
    from troupe.core.vocabulary.tools import Tool, ToolContext, create_tool
    from troupe.storage import MemoryStore, RedisStore, SqliteStore
    from troupe.supervisor import Agent, Runtime

# public name -> the module that defines it (a module itself where the name is a submodule)
_EXPORTS: dict[str, str] = {
    "A2AAgent": "troupe.actors.a2a.agent",
    "Agent": "troupe.supervisor",
    "AgentStream": "troupe.core.vocabulary.stream",
    "ApproverPolicy": "troupe.core.deciding.approvers",
    "Chunk": "troupe.core.vocabulary.chunks",
    "DelegatedBy": "troupe.core.vocabulary.suspended",
    "Hooks": "troupe.core.vocabulary.hooks",
    "LinkSigner": "troupe.core.notifying.links",
    "MCPHttp": "troupe.core.vocabulary.mcp_servers",
    "MCPStdio": "troupe.core.vocabulary.mcp_servers",
    "Memory": "troupe.core.run.memory",
    "MemoryStore": "troupe.storage",
    "Model": "troupe.core.vocabulary.model",
    "NotificationTarget": "troupe.core.notifying.outbox",
    "Notifications": "troupe.core.notifying.outbox",
    "OpenAIModel": "troupe.core.models.openai_model",
    "PendingToolCall": "troupe.core.vocabulary.suspended",
    "Principal": "troupe.core.vocabulary.identity",
    "RedisStore": "troupe.storage",
    "RetrySchedule": "troupe.core.notifying.outbox",
    "RunResult": "troupe.core.vocabulary.results",
    "Runtime": "troupe.supervisor",
    "SqliteStore": "troupe.storage",
    "StepResult": "troupe.core.vocabulary.results",
    "SuspendedRun": "troupe.core.vocabulary.suspended",
    "SuspendedRunList": "troupe.core.vocabulary.suspended",
    "Tool": "troupe.core.vocabulary.tools",
    "ToolCallOverride": "troupe.core.vocabulary.hooks",
    "ToolContext": "troupe.core.vocabulary.tools",
    "create_tool": "troupe.core.vocabulary.tools",
}
_SUBMODULES = ("client", "errors", "testing")

__all__ = [  # the names of _EXPORTS and _SUBMODULES, spelled out for type checkers and linters
    "A2AAgent",
    "Agent",
    "AgentStream",
    "ApproverPolicy",
    "Chunk",
    "DelegatedBy",
    "Hooks",
    "LinkSigner",
    "MCPHttp",
    "MCPStdio",
    "Memory",
    "MemoryStore",
    "Model",
    "NotificationTarget",
    "Notifications",
    "OpenAIModel",
    "PendingToolCall",
    "Principal",
    "RedisStore",
    "RetrySchedule",
    "RunResult",
    "Runtime",
    "SqliteStore",
    "StepResult",
    "SuspendedRun",
    "SuspendedRunList",
    "Tool",
    "ToolCallOverride",
    "ToolContext",
    "client",
    "create_tool",
    "errors",
    "testing",
]


def __getattr__(name: str) -> _typing.Any:
    if name in _SUBMODULES:
        return _importlib.import_module(f"troupe.{name}")
    if name == "__version__":
        from troupe.ops.version import installed_version

        value: _typing.Any = installed_version()
    else:
        try:
            module = _EXPORTS[name]
        except KeyError:
            raise AttributeError(f"module 'troupe' has no attribute {name!r}") from None
        value = getattr(_importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    """The public API (``__all__``) and the module's dunders, ``__version__`` among them: none of the
    private names or imports this module uses itself."""
    dunders = {name for name in globals() if name.startswith("__") and name.endswith("__")}
    return sorted({*__all__, *dunders, "__version__"})
