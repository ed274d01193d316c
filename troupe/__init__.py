"""Troupe: an actor-model multi-agent runtime with human-in-the-loop tool approval.

This package is the public face: it re-exports what users need and nothing inside the project imports it.
"""

from core.chunks import Chunk
from core.hooks import Hooks, ToolCallOverride
from core.memory import Memory
from core.model import Model
from core.openai_model import OpenAIModel
from core.results import RunResult, StepResult
from core.stream import AgentStream
from core.suspended import PendingToolCall, SuspendedRun, SuspendedRunList
from core.tools import Tool, ToolContext, create_tool
from storage import MemoryStore, RedisStore, SqliteStore
from supervisor import Agent, Runtime
from troupe import errors, testing

__all__ = [
    "Agent",
    "AgentStream",
    "Chunk",
    "Hooks",
    "Memory",
    "MemoryStore",
    "Model",
    "OpenAIModel",
    "PendingToolCall",
    "RedisStore",
    "RunResult",
    "Runtime",
    "SqliteStore",
    "StepResult",
    "SuspendedRun",
    "SuspendedRunList",
    "Tool",
    "ToolCallOverride",
    "ToolContext",
    "create_tool",
    "errors",
    "testing",
]
