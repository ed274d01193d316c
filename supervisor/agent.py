"""The public ``Agent``: an agent definition plus the run methods, bound to a Runtime.

An Agent used without a Runtime runs on the process's default one (MemoryStore, Ray started locally).
"""

from __future__ import annotations

import copy
import uuid
from typing import Any

from troupe.core.run.agent import AgentSpec
from troupe.core.tracing import carrier
from troupe.core.vocabulary.agent_api import Messages
from troupe.core.vocabulary.errors import DecisionRejectedError
from troupe.core.vocabulary.identity import SURFACES, Principal
from troupe.core.vocabulary.options import StreamOptions, SuspendedRunFilters
from troupe.core.vocabulary.requests import CancelledRun, CancelRequest, DecideRequest, StartRequest
from troupe.core.vocabulary.results import RunResult
from troupe.core.vocabulary.run_methods import CancelCall, Decision, RunMethods
from troupe.core.vocabulary.stream import AgentStream
from troupe.core.vocabulary.suspended import SuspendedRunList
from troupe.supervisor.agent_runtime import AgentRuntime, default_agent_runtime


class Agent(AgentSpec, RunMethods):
    """An agent: a model with instructions, tools and subagents, and the methods that run it.

    Tool calls can pause for a person (an approval, or ``suspend()`` from inside a tool); the run methods
    start runs, decide their paused calls, list and cancel them. They are coroutines: ``await`` them
    (``asyncio.run`` in a script, top-level ``await`` in a notebook). An Agent registered with a
    ``Runtime`` runs on that runtime's store and actors; one used without a runtime runs on a process
    default one (a ``MemoryStore``, Ray started locally).

    Args:
        id: The agent's id, unique in its runtime (the HTTP routes and the audit name it): 1-64 letters,
            digits, ``_`` or ``-``, as it is a segment of its URLs and the name of its MCP tool.
        name: A display name (default: the id).
        description: What the agent does; a supervisor's model reads it for a subagent.
        instructions: The system prompt.
        model: A ``Model`` (``troupe.testing``'s scripted ones, an ``OpenAIModel``), or a string
            ``"openai/<model>"`` for OpenAI or any compatible server (``OPENAI_BASE_URL``,
            ``OPENAI_API_KEY``).
        tools: The agent's tools: a dict (the key is the name the model sees) or a list (each named by
            its id).
        agents: Subagents by key; each becomes a tool ``agent-<key>`` taking ``{"prompt": str}``, and
            its pauses bubble up to this agent's runs.
        memory: ``Memory()`` keeps threads and their messages in the runtime's store.
        default_options: Options of ``stream`` (``max_steps``, ``require_tool_approval``, ...) used when
            a call leaves them out.
        hooks: ``Hooks(before_tool_call=..., after_tool_call=...)``, called around every tool call.
        mcp_servers: MCP servers (``MCPStdio``, ``MCPHttp``) whose tools the agent takes too.

    Raises:
        ValueError: An id outside 1-64 letters, digits, ``_`` or ``-``; a tool name (a tools dict's key,
            a subagent's ``agent-<key>``) outside the same rule, which model APIs hold tool names to; or
            a tool name that clashes with a subagent's tool.
        TypeError: A subagent that is not an Agent.
        InvalidOptionError: An unknown name in ``default_options``.

    Example:
        >>> from troupe import Agent, create_tool
        >>> from troupe.testing import ScriptedModel, text, tool_call
        >>> from pydantic import BaseModel
        >>> class Record(BaseModel):
        ...     id: str
        >>> delete = create_tool("delete_record", "Delete a record", Record,
        ...                      lambda record, ctx: {"deleted": record.id}, require_approval=True)
        >>> agent = Agent("records", model=ScriptedModel([
        ...     tool_call("delete_record", {"id": "abc-123"}, id="call-1"), text("Deleted.")]),
        ...     tools=[delete])
        >>> paused = await agent.generate("Delete abc-123")
        >>> paused.finish_reason
        'suspended'
        >>> (await agent.approve_tool_call_generate(run_id=paused.run_id)).text
        'Deleted.'
    """

    _runtime: AgentRuntime | None = None

    def __getstate__(self) -> dict[str, Any]:
        # The runtime binding stays in the caller's process; hosts get the definition only.
        state = self.__dict__.copy()
        state.pop("_runtime", None)
        return state

    def bound_to(self, runtime: AgentRuntime) -> Agent:
        """This agent bound to ``runtime``: itself if unbound (or bound there already), else a copy.

        ``Runtime.register`` and ``Runtime.get_agent`` do this; a program rarely needs to.

        Args:
            runtime: The runtime whose store and actors the agent's runs use.

        Returns:
            The agent, bound to ``runtime``.
        """
        if self._runtime is None or self._runtime is runtime:
            self._runtime = runtime
            return self
        other = copy.copy(self)
        other._runtime = runtime
        return other

    @property
    def runtime(self) -> AgentRuntime:
        """The runtime this agent runs on: the one it was registered with, or the process default one
        (made on first use)."""
        if self._runtime is None:
            default_agent_runtime().register(self, replace=True)
        assert self._runtime is not None
        return self._runtime

    # ---- how the run methods (troupe.core.vocabulary.run_methods) reach the runtime ------------------

    async def _start(self, messages: Messages, options: StreamOptions) -> AgentStream:
        return await self.runtime.stream(self.id, self.start_request(messages, options))

    async def _start_to_result(self, messages: Messages, options: StreamOptions) -> RunResult:
        return await self.runtime.generate(self.id, self.start_request(messages, options))

    @staticmethod
    def start_request(messages: Messages, options: StreamOptions, *, remote: bool = False) -> StartRequest:
        """What starting a run asks of the agent's host.

        Args:
            messages: The run's messages, as ``stream`` takes them.
            options: The options given (omitted ones absent or None).
            remote: The options come from a caller the runtime does not trust (an HTTP body), which may
                turn approval on but never off.

        Returns:
            The ``StartRequest``, with a new run id unless ``options`` named one.
        """
        given: dict[str, Any] = {k: v for k, v in options.items() if v is not None}
        # Known here too, so that a lost reply can be followed up.
        generated = "run_id" not in given
        given.setdefault("run_id", str(uuid.uuid4()))
        return StartRequest(messages, given, trace=carrier(), generated_run_id=generated, remote=remote)

    def _request(self, run_id: str, decision: Decision) -> DecideRequest:
        decider, surface = _acting(decision.decided_by, decision.roles, decision.surface)
        return DecideRequest(
            run_id=run_id,
            decision=decision.what,
            tool_call_id=decision.tool_call_id,
            fingerprint=decision.fingerprint,
            decider=decider,
            surface=surface,
            trace=carrier(),
        )

    async def _decide(self, run_id: str, decision: Decision) -> AgentStream:
        return await self.runtime.decide(self.id, self._request(run_id, decision))

    async def _decide_to_result(self, run_id: str, decision: Decision) -> RunResult:
        return await self.runtime.decide_generate(self.id, self._request(run_id, decision))

    async def _decide_on_thread(
        self, thread_id: str, resource_id: str | None, decision: Decision
    ) -> AgentStream:
        run_id = await self.runtime.find_suspended_run(
            self.id, thread_id=thread_id, resource_id=resource_id, tool_call_id=decision.tool_call_id
        )
        return await self._decide(run_id, decision)

    async def _list_suspended(self, filters: SuspendedRunFilters) -> SuspendedRunList:
        return await self.runtime.list_suspended_runs(self.id, **filters)

    async def _cancel(self, run_id: str, cancel: CancelCall) -> CancelledRun:
        canceller, surface = _acting(cancel.cancelled_by, cancel.roles, cancel.surface)
        request = CancelRequest(
            run_id=run_id,
            reason=cancel.reason,
            tool_call_id=cancel.tool_call_id,
            fingerprint=cancel.fingerprint,
            canceller=canceller,
            surface=surface,
        )
        return await self.runtime.cancel_run(self.id, request)

    # ---- following a run ----------------------------------------------------------------------------

    async def observe_stream(self, *, run_id: str) -> AgentStream:
        """Follow a run from now on, wherever it stands.

        The stream carries what the operation driving the run sends from now on (one recovered after a
        crash, say), or a replay of where the run stands: its open pauses. Whoever else reads the run (its
        caller) reads on as before: each reader gets every chunk from when it started reading.

        Args:
            run_id: The run to follow (top-level or a subagent's).

        Returns:
            The run's ``AgentStream`` from now on.

        Raises:
            SnapshotNotFoundError: No such run of this agent, or it has finished.
        """
        return await self.runtime.observe(self.id, run_id)


def _acting(
    who: str | Principal | None, roles: frozenset[str] | None, surface: str | None
) -> tuple[Principal | None, str]:
    """Who acts (a decision or a cancel; None: the process itself) and through which surface."""
    surface = surface or "python"
    if surface not in SURFACES:
        raise DecisionRejectedError(f"surface must be one of {sorted(SURFACES)}, got {surface!r}")
    try:
        return (Principal.named(who, roles) if who is not None else None), surface
    except ValueError as exc:
        raise DecisionRejectedError(str(exc)) from None


__all__ = ["Agent"]
