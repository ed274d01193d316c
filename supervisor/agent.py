"""The public ``Agent``: an agent definition plus the run methods, bound to a Runtime.

An Agent used without a Runtime runs on the process's default one (MemoryStore, Ray started locally).
"""

from __future__ import annotations

import copy
import uuid
from typing import Any, Unpack

from troupe.core.run.agent import AgentSpec
from troupe.core.tracing import carrier
from troupe.core.vocabulary.agent_api import Messages
from troupe.core.vocabulary.errors import DecisionRejectedError
from troupe.core.vocabulary.identity import SURFACES, Principal
from troupe.core.vocabulary.options import (
    CancelOptions,
    DecisionOptions,
    StreamOptions,
    SuspendedRunFilters,
)
from troupe.core.vocabulary.requests import (
    Approve,
    CancelledRun,
    CancelRequest,
    DecideRequest,
    DecisionInput,
    Decline,
    Resume,
    StartRequest,
)
from troupe.core.vocabulary.results import RunResult
from troupe.core.vocabulary.stream import AgentStream
from troupe.core.vocabulary.suspended import SuspendedRunList
from troupe.supervisor.agent_runtime import AgentRuntime, default_agent_runtime


class Agent(AgentSpec):
    _runtime: AgentRuntime | None = None

    def __getstate__(self) -> dict[str, Any]:
        # The runtime binding stays in the caller's process; hosts get the definition only.
        state = self.__dict__.copy()
        state.pop("_runtime", None)
        return state

    def bound_to(self, runtime: AgentRuntime) -> Agent:
        if self._runtime is None or self._runtime is runtime:
            self._runtime = runtime
            return self
        other = copy.copy(self)
        other._runtime = runtime
        return other

    @property
    def runtime(self) -> AgentRuntime:
        if self._runtime is None:
            default_agent_runtime().register(self, replace=True)
        assert self._runtime is not None
        return self._runtime

    # ---- running ------------------------------------------------------------------------------------

    async def stream(self, messages: Messages, **options: Unpack[StreamOptions]) -> AgentStream:
        """Start a run and stream it. Omitted options come from ``default_options``."""
        return await self.runtime.stream(self.id, self.start_request(messages, options))

    async def generate(self, messages: Messages, **options: Unpack[StreamOptions]) -> RunResult:
        """Run to the end or to the first pause (``finish_reason == "suspended"``)."""
        return await self.runtime.generate(self.id, self.start_request(messages, options))

    @staticmethod
    def start_request(messages: Messages, options: StreamOptions, *, remote: bool = False) -> StartRequest:
        """What starting a run asks of the agent's host. ``remote``: the options come from a caller the
        runtime does not trust (an HTTP body), which may turn approval on but never off."""
        given: dict[str, Any] = {k: v for k, v in options.items() if v is not None}
        # Known here too, so that a lost reply can be followed up.
        generated = "run_id" not in given
        given.setdefault("run_id", str(uuid.uuid4()))
        return StartRequest(messages, given, trace=carrier(), generated_run_id=generated, remote=remote)

    # ---- deciding -----------------------------------------------------------------------------------

    def _decision(self, run_id: str, decision: DecisionInput, options: DecisionOptions) -> DecideRequest:
        decider, surface = _acting(options.get("decided_by"), options.get("roles"), options.get("surface"))
        return DecideRequest(
            run_id=run_id,
            decision=decision,
            tool_call_id=options.get("tool_call_id"),
            fingerprint=options.get("fingerprint"),
            decider=decider,
            surface=surface,
            trace=carrier(),
        )

    async def approve_tool_call(
        self, *, run_id: str, edited_args: dict[str, Any] | None = None, **options: Unpack[DecisionOptions]
    ) -> AgentStream:
        return await self.runtime.decide(self.id, self._decision(run_id, Approve(edited_args), options))

    async def decline_tool_call(
        self, *, run_id: str, reason: str | None = None, **options: Unpack[DecisionOptions]
    ) -> AgentStream:
        return await self.runtime.decide(self.id, self._decision(run_id, Decline(reason), options))

    async def approve_tool_call_generate(
        self, *, run_id: str, edited_args: dict[str, Any] | None = None, **options: Unpack[DecisionOptions]
    ) -> RunResult:
        return await self.runtime.decide_generate(
            self.id, self._decision(run_id, Approve(edited_args), options)
        )

    async def decline_tool_call_generate(
        self, *, run_id: str, reason: str | None = None, **options: Unpack[DecisionOptions]
    ) -> RunResult:
        return await self.runtime.decide_generate(self.id, self._decision(run_id, Decline(reason), options))

    async def resume_stream(
        self, resume_data: Any, *, run_id: str, **options: Unpack[DecisionOptions]
    ) -> AgentStream:
        return await self.runtime.decide(self.id, self._decision(run_id, Resume(resume_data), options))

    async def resume_generate(
        self, resume_data: Any, *, run_id: str, **options: Unpack[DecisionOptions]
    ) -> RunResult:
        return await self.runtime.decide_generate(
            self.id, self._decision(run_id, Resume(resume_data), options)
        )

    # ---- cancelling ---------------------------------------------------------------------------------

    async def cancel_run(
        self, run_id: str, *, reason: str | None = None, **options: Unpack[CancelOptions]
    ) -> CancelledRun:
        """Cancel a run, wherever it stands: in a model turn, in a tool, or paused.

        Returns once the cancel is durable: from then on the run never resumes. A run driven in this
        runtime stops at once; one another process drives stops at its next write or heartbeat (a couple
        of seconds). Its in-flight work is cancelled (an async tool through asyncio; a sync tool's thread
        runs on, and what it returns is recorded in the audit log, never given to a model), its subagent
        runs are cancelled too, its pending pauses are withdrawn, and its stream ends with
        ``finish_reason="cancelled"``. Cancelling a subagent's run fails the parent's delegation with a
        tool error the parent's model sees, naming the cancel and ``reason``.

        Args:
            run_id: the run to cancel (a top-level run, or a subagent's).
            reason: why; recorded in the audit log and told (default "The run was cancelled").
            **options: ``tool_call_id`` and ``fingerprint`` (cancel only while that call still waits as
                it was seen: against an approval of it, exactly one of the two wins); ``cancelled_by``
                and ``roles`` (who cancels: the run's starter, an admin or an approver its approver
                policies name; None, the default, is this process itself); ``surface`` (for the audit).

        Returns:
            ``CancelledRun``: who cancelled, why, when, and where the run stood.

        Raises:
            RunCancelledError: the run was cancelled already (409; a retry of the same cancel by the
                same canceller is answered as the first was).
            RunNotCancellableError: the run has already finished (409).
            SnapshotNotFoundError: no such run of this agent (404).
            CancelForbiddenError: ``cancelled_by`` may not cancel it (403).
            DecisionConflictError: the call given by ``tool_call_id`` was decided first (409, naming who).

        Example:
            >>> stream = await agent.stream("pay the vendor")        # doctest: +SKIP
            >>> await agent.cancel_run(stream.run_id, reason="wrong vendor")  # doctest: +SKIP
            >>> (await stream.result()).finish_reason                 # doctest: +SKIP
            'cancelled'
        """
        who, roles = options.get("cancelled_by"), options.get("roles")
        canceller, surface = _acting(who, roles, options.get("surface"))
        request = CancelRequest(
            run_id=run_id,
            reason=reason,
            tool_call_id=options.get("tool_call_id"),
            fingerprint=options.get("fingerprint"),
            canceller=canceller,
            surface=surface,
        )
        return await self.runtime.cancel_run(self.id, request)

    async def observe_stream(self, *, run_id: str) -> AgentStream:
        """Follow a run from now on: the operation driving it (e.g. one recovered after a crash), or a
        replay of where it stands (its open pauses). ``SnapshotNotFoundError`` once it has finished."""
        return await self.runtime.observe(self.id, run_id)

    # ---- finding paused runs ------------------------------------------------------------------------

    async def list_suspended_runs(self, **filters: Unpack[SuspendedRunFilters]) -> SuspendedRunList:
        return await self.runtime.list_suspended_runs(self.id, **filters)

    async def send_tool_approval(
        self,
        *,
        thread_id: str,
        resource_id: str | None,
        approved: bool,
        tool_call_id: str | None = None,
        reason: str | None = None,
        resume_data: Any = None,
        decided_by: str | Principal | None = None,
        roles: frozenset[str] | None = None,
        surface: str | None = None,
    ) -> AgentStream:
        """Decide the paused call of the run suspended on a thread, without knowing its run id.

        ``resume_data`` answers a ``suspend()`` pause; otherwise ``approved`` approves or declines.
        """
        if resume_data is not None and not approved:
            raise DecisionRejectedError(
                "resume_data answers a paused tool and cannot come with approved=False; "
                "to decline, pass approved=False without resume_data"
            )
        run_id = await self.runtime.find_suspended_run(
            self.id, thread_id=thread_id, resource_id=resource_id, tool_call_id=tool_call_id
        )
        decision: DecisionInput
        if resume_data is not None:
            decision = Resume(resume_data)
        else:
            decision = Approve() if approved else Decline(reason)
        request = self._decision(
            run_id,
            decision,
            {"tool_call_id": tool_call_id, "decided_by": decided_by, "roles": roles, "surface": surface},
        )
        return await self.runtime.decide(self.id, request)


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
