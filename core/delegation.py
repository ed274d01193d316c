"""Delegation to a subagent: the ``agent-<key>`` tool of a supervisor.

The subagent runs in its own host (its own Ray actor) under a run id derived from the supervisor's run
and call, so either side can find the other after a restart. Its chunks reach the supervisor's stream as
``tool-output``; a pause below becomes a pause of the delegation call here, shown with this agent's own
``tool_call_id``, the leaf's tool and args, and the path of agents down to the leaf.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field
from troupe.core.agent import AgentSpec
from troupe.core.chunks import PAUSE_TYPES, Chunk
from troupe.core.requests import AgentPort, ChunkBatches, StartRequest
from troupe.core.state import CallStatus, ChildLink, ParentLink, Pause, ToolCallState, fingerprint
from troupe.core.tools import Tool, create_tool
from troupe.core.tracing import carrier, span

if TYPE_CHECKING:
    from troupe.core.loop import ActiveRun, RunLoop

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
        self, loop: RunLoop, run: ActiveRun, call: ToolCallState, *, reattach: bool = False
    ) -> None:
        """Start the subagent's run, or follow the one a decision was routed to; with ``reattach`` (a
        recovered parent), pick up the subagent's run wherever it stands, starting it only if it never
        began."""
        child_id = child_run_id(run.state.run_id, call.tool_call_id)
        with span(
            "troupe.delegation",
            troupe__agent_id=self.spec.id,
            troupe__child_run_id=child_id,
            troupe__reattach=reattach,
        ):
            source = run.child_streams.pop(call.tool_call_id, None)
            if source is None and reattach:
                source = await self.port.attach(child_id)
            if source is None:
                source = await self._start(loop, run, call)
            else:
                call.child = ChildLink(agent_key=self.key, agent_id=self.spec.id, run_id=child_id)
            await self._relay(loop, run, call, source)

    async def _start(self, loop: RunLoop, run: ActiveRun, call: ToolCallState) -> ChunkBatches:
        state = run.state
        child_id = child_run_id(state.run_id, call.tool_call_id)
        call.child = ChildLink(agent_key=self.key, agent_id=self.spec.id, run_id=child_id)
        options = {"run_id": child_id, "request_context": state.request_context}
        if state.resource_id is not None:
            options["resource_id"] = state.resource_id
        prompt = DelegationInput.model_validate(call.effective_args).prompt
        request = StartRequest(
            messages=[{"role": "user", "content": prompt}],
            options_given=options,
            trace=carrier(),
            parent=ParentLink(run_id=state.run_id, tool_call_id=call.tool_call_id, agent_id=loop.spec.id),
        )
        return await self.port.start(request)

    async def _relay(self, loop: RunLoop, run: ActiveRun, call: ToolCallState, source: ChunkBatches) -> None:
        """Pass the subagent's chunks up as tool-output and turn its outcome into this call's outcome."""
        text: list[str] = []  # of the subagent's latest step: its answer is its last turn's text
        pauses: list[Chunk] = []
        error: dict[str, Any] | None = None
        async for batch in source:
            for chunk in batch:
                if chunk.type in PAUSE_TYPES:
                    # Not relayed: this level announces the pause itself, once its own checkpoint holds it.
                    pauses.append(chunk)
                    continue
                if chunk.type == "step-start":
                    text = []
                elif chunk.type == "text-delta":
                    text.append(chunk.payload["text"])
                elif chunk.type == "error":
                    error = chunk.payload.get("error")
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
            call.pauses = [self._lift(loop, run, call, chunk) for chunk in pauses]
            latest = call.pauses[-1]
            call.status = CallStatus.AWAITING_APPROVAL if latest.kind == "approval" else CallStatus.SUSPENDED
            return
        assert call.child is not None
        run.consumed_children.append(call.child.run_id)
        if error is not None:
            loop.done(run, call, {"error": error.get("message", "subagent failed")}, is_error=True)
        else:
            loop.done(run, call, "".join(text))

    def _lift(self, loop: RunLoop, run: ActiveRun, call: ToolCallState, chunk: Chunk) -> Pause:
        """A subagent's pause, as this agent shows it."""
        inner = chunk.payload
        return Pause(
            kind="approval" if chunk.type == "tool-call-approval" else "suspend",
            tool_name=inner["tool_name"],
            args=inner["args"],
            suspend_payload=inner.get("suspend_payload"),
            resume_schema=inner.get("resume_schema"),
            agent_path=[loop.spec.id, *inner["agent_path"]],
            fingerprint=fingerprint(
                call.tool_call_id, inner["tool_name"], inner["args"], inner["fingerprint"]
            ),
            inner_tool_call_id=inner["tool_call_id"],
            inner_fingerprint=inner["fingerprint"],
            seq=loop.next_seq(run.state),
            interrupted=bool(inner.get("interrupted")),
            expires_at=loop.deadline(run.state, _parse_time(inner.get("expires_at"))),
        )


def _parse_time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def delegation_tool(delegation: Delegation) -> Tool:
    """The tool the supervisor's model sees. The loop runs delegations itself; ``execute`` is never used."""

    def _not_direct(_input: Any, _ctx: Any) -> Any:
        raise RuntimeError("delegation tools are run by the agent loop")

    description = delegation.spec.description or f"Delegate a task to the {delegation.spec.name} agent."
    return create_tool(delegation.spec.id, description, DelegationInput, _not_direct)


__all__ = ["Delegation", "DelegationInput", "child_run_id", "delegation_tool"]
