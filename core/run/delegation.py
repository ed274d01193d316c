"""Delegation to a subagent: the ``agent-<key>`` tool of a supervisor.

The subagent runs in its own host (its own Ray actor) under a run id derived from the supervisor's run
and call, so either side can find the other after a restart. Its chunks reach the supervisor's stream as
``tool-output``; a pause below becomes a pause of the delegation call here, shown with this agent's own
``tool_call_id``, the leaf's tool and args, and the path of agents down to the leaf.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field
from troupe.core.deciding.cancelling import child_message
from troupe.core.run.agent import AgentSpec
from troupe.core.run.flow import ActiveRun, ChildFailed, ChildFinished, ChildOutcome, ChildPaused
from troupe.core.tracing import carrier, span
from troupe.core.vocabulary.chunks import PAUSE_TYPES, Chunk, PauseEvent
from troupe.core.vocabulary.errors import AgentUnavailableError, StorageError
from troupe.core.vocabulary.identity import Principal
from troupe.core.vocabulary.requests import AgentPort, ChunkBatches, StartRequest
from troupe.core.vocabulary.state import ChildLink, ParentLink, ToolCallState
from troupe.core.vocabulary.tools import Tool, create_tool

_CHILD_NS = uuid.UUID("8a0f3f1e-3c1b-4b7e-9a53-4d3e1f0b7c21")


class DelegationInput(BaseModel):
    prompt: str = Field(description="The task for the subagent, with everything it needs to know.")


def child_run_id(parent_run_id: str, tool_call_id: str) -> str:
    return str(uuid.uuid5(_CHILD_NS, f"{parent_run_id}\x1f{tool_call_id}"))


@dataclass
class Delegation:
    key: str
    spec: AgentSpec
    port: AgentPort

    async def run(
        self,
        run: ActiveRun,
        call: ToolCallState,
        *,
        parent_agent: str,
        source: ChunkBatches | None = None,
        reattach: bool = False,
    ) -> ChildOutcome:
        """Start the subagent's run, or follow ``source`` (the stream of a decision routed to it); with
        ``reattach`` (a recovered parent), pick up the subagent's run wherever it stands, starting it
        only if it never began. Its chunks go out as tool-output; how it ended comes back."""
        link = ChildLink(
            agent_key=self.key,
            agent_id=self.spec.id,
            run_id=child_run_id(run.state.run_id, call.tool_call_id),
        )
        with span(
            "troupe.delegation",
            troupe__agent_id=self.spec.id,
            troupe__child_run_id=link.run_id,
            troupe__reattach=reattach,
        ):
            if source is None and reattach:
                source = await self.port.attach(link.run_id)
            if source is None:
                try:
                    source = await self._start(run, call, link, parent_agent)
                except (StorageError, AgentUnavailableError):
                    # Not the subagent's failure: where its run stands is unknown (the store is out, or
                    # its host went away while taking it), so this run fails and recovery settles it.
                    raise
                except Exception as exc:
                    # The subagent's run could not start (its MCP server will not open, say): a failed
                    # delegation the model hears, as when the run had started and failed, not this run's end.
                    return ChildFailed(link, f"the subagent could not start: {type(exc).__name__}: {exc}")
            return await self._relay(run, call, link, source)

    async def _start(
        self, run: ActiveRun, call: ToolCallState, link: ChildLink, parent_agent: str
    ) -> ChunkBatches:
        state = run.state
        options: dict[str, Any] = {"run_id": link.run_id, "request_context": state.request_context}
        if state.resource_id is not None:
            options["resource_id"] = state.resource_id
        starter = state.starter
        if starter is not None:  # so whoever started the whole run may cancel this part of it too
            options["started_by"] = Principal(starter.subject, starter.issuer, starter.name)
        prompt = DelegationInput.model_validate(call.effective_args).prompt
        request = StartRequest(
            messages=[{"role": "user", "content": prompt}],
            options_given=options,
            trace=carrier(),
            parent=ParentLink(
                run_id=state.run_id,
                tool_call_id=call.tool_call_id,
                agent_id=parent_agent,
                agent_path=[*(state.parent.agent_path if state.parent is not None else ()), parent_agent],
            ),
        )
        return await self.port.start(request)

    async def _relay(
        self, run: ActiveRun, call: ToolCallState, link: ChildLink, source: ChunkBatches
    ) -> ChildOutcome:
        """Pass the subagent's chunks up as tool-output and say how its run ended."""
        text: list[str] = []  # of the subagent's latest step: its answer is its last turn's text
        pauses: list[PauseEvent] = []
        error: dict[str, Any] | None = None
        finish: dict[str, Any] = {}
        async for batch in source:
            for chunk in batch:
                if chunk.type in PAUSE_TYPES:
                    # Not relayed: this level announces the pause itself, once its own checkpoint holds it.
                    pauses.append(_pause_of(chunk))
                    continue
                if chunk.type == "step-start":
                    text = []
                elif chunk.type == "text-delta":
                    text.append(chunk.payload["text"])
                elif chunk.type == "error":
                    error = chunk.payload.get("error")
                elif chunk.type == "finish":
                    finish = chunk.payload
                # Mastra's tool-output: the subagent's chunk as ``output``.
                inner: dict[str, Any] = {"type": chunk.type, "run_id": chunk.run_id, "from": "AGENT"}
                inner["payload"] = chunk.payload
                run.chunk(
                    "tool-output",
                    tool_call_id=call.tool_call_id,
                    tool_name=call.tool_name,
                    agent_id=self.spec.id,
                    output=inner,
                )
        if pauses:
            return ChildPaused(link, tuple(pauses))
        stopped = child_message(link.run_id, finish)
        if stopped is not None:  # cancelled below (not from here): the parent's model hears why
            return ChildFailed(link, stopped)
        if error is not None:
            return ChildFailed(link, error.get("message", "subagent failed"))
        return ChildFinished(link, "".join(text))


def _pause_of(chunk: Chunk) -> PauseEvent:
    if chunk.pause is None:
        raise TypeError(f"a {chunk.type} chunk from a subagent carries no PauseEvent: {chunk!r}")
    return chunk.pause


def delegation_tool(delegation: Delegation) -> Tool:
    """The tool the supervisor's model sees. The loop runs delegations itself; ``execute`` is never used."""

    def _not_direct(_input: Any, _ctx: Any) -> Any:
        raise RuntimeError("delegation tools are run by the agent loop")

    description = delegation.spec.description or f"Delegate a task to the {delegation.spec.name} agent."
    return create_tool(delegation.spec.id, description, DelegationInput, _not_direct)


__all__ = ["Delegation", "DelegationInput", "child_run_id", "delegation_tool"]
