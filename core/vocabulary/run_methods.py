"""``RunMethods``: an agent's run methods, written once for every way of reaching it.

An agent is reached in-process (``troupe.Agent``) or over HTTP (``troupe.client.AsyncAgentClient``; the
blocking ``AgentClient`` wraps that one). Each of them inherits the eleven run methods from here, with
their keyword arguments and their documentation, and provides only how a request gets to the agent: the
underscored primitives at the end of the class. So what a method takes, checks and means is said once,
and ``AgentAPI`` (``troupe.core.vocabulary.agent_api``) is the protocol for typing code that takes any of
them.

Who acts (``decided_by``, ``roles``, ``surface``, ``started_by``, ``cancelled_by``) is given in-process
only; over HTTP the server takes it from the caller's credential, and the clients refuse it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from troupe.core.vocabulary.agent_api import Messages
from troupe.core.vocabulary.errors import DecisionRejectedError
from troupe.core.vocabulary.identity import Principal
from troupe.core.vocabulary.options import RunPolicy, StreamOptions, SuspendedRunFilters, text_or_none
from troupe.core.vocabulary.requests import Approve, CancelledRun, Decline, Resume
from troupe.core.vocabulary.results import RunResult
from troupe.core.vocabulary.stream import AgentStream
from troupe.core.vocabulary.suspended import SuspendedRunList


@dataclass(frozen=True)
class Decision:
    """A decision on a paused call as its caller gave it, before a way of reaching the agent carries it.

    ``what`` is the decision (approve, decline, or resume data); the rest say which call and who decides
    (None where the caller did not say).
    """

    what: Approve | Decline | Resume
    tool_call_id: str | None = None
    fingerprint: str | None = None
    decided_by: str | Principal | None = None
    roles: frozenset[str] | None = None
    surface: str | None = None

    def __post_init__(self) -> None:
        reason = self.what.reason if isinstance(self.what, Decline) else None
        text_or_none(reason=reason, tool_call_id=self.tool_call_id, fingerprint=self.fingerprint)

    def acting(self) -> dict[str, Any]:
        """Who decides and where, as given (the names the caller used, omitted ones left out)."""
        return _given(decided_by=self.decided_by, roles=self.roles, surface=self.surface)


@dataclass(frozen=True)
class CancelCall:
    """A cancel as its caller gave it (see ``RunMethods.cancel_run``)."""

    reason: str | None = None
    tool_call_id: str | None = None
    fingerprint: str | None = None
    cancelled_by: str | Principal | None = None
    roles: frozenset[str] | None = None
    surface: str | None = None

    def __post_init__(self) -> None:
        text_or_none(reason=self.reason, tool_call_id=self.tool_call_id, fingerprint=self.fingerprint)

    def acting(self) -> dict[str, Any]:
        """Who cancels and where, as given (omitted ones left out)."""
        return _given(cancelled_by=self.cancelled_by, roles=self.roles, surface=self.surface)


class RunMethods:
    """The run methods of an agent: start a run, decide its paused calls, find and cancel runs.

    Every method is a coroutine. A method that streams returns an ``AgentStream`` once the agent has
    accepted the operation (so a wrong run id or a conflicting decision raises here, before any chunk);
    its ``_generate`` twin returns the ``RunResult`` when the run ends or pauses again.
    """

    # ---- running ------------------------------------------------------------------------------------

    async def stream(
        self,
        messages: Messages,
        *,
        require_tool_approval: RunPolicy | None = None,
        auto_resume_suspended_tools: bool | None = None,
        thread_id: str | None = None,
        resource_id: str | None = None,
        request_context: dict[str, Any] | None = None,
        max_steps: int | None = None,
        run_id: str | None = None,
        approval_timeout: float | None = None,
        started_by: str | Principal | None = None,
        max_duration_s: float | None = None,
        duration_counts_waiting: bool | None = None,
    ) -> AgentStream:
        """Start a run and stream it as it goes.

        Every option left out (or None) comes from the agent's ``default_options``, then from the
        defaults below.

        Args:
            messages: The user's message as a string, or a conversation as a list of
                ``{"role", "content"}`` dicts.
            require_tool_approval: True pauses every tool call for a person's approval; a function
                ``(tool_name, args, request_context, workspace) -> bool`` (sync or async) decides per call,
                and one that raises means approval is required. A tool's own ``require_approval`` decides
                for that tool. Default False. Over HTTP only a bool travels (a function is sent as True),
                and a request may turn approval on, never off.
            auto_resume_suspended_tools: With ``memory`` and a ``thread_id``, the next user message on
                the thread answers a tool paused by ``suspend()`` (it becomes the resume data). A model
                never approves a call this way. Default False.
            thread_id: The conversation thread (what ``Memory`` keeps, and what ``send_tool_approval``
                finds a run by).
            resource_id: Whose the thread and the run are (a user, a tenant); over HTTP a caller sees
                only the runs of its own resources.
            request_context: Any dict, handed to tools as ``ctx.request_context``.
            max_steps: At most this many model turns (default 10).
            run_id: The run's id (default: a new uuid).
            approval_timeout: Seconds a pause may wait for its person; after that the call is declined
                with a reason the model sees (default: it waits for ever). At most 100 years.
            started_by: Who starts the run (a name, or a ``Principal``), so that an approver policy
                with separation of duties keeps them from deciding its calls. In-process only: over
                HTTP the caller's credential says.
            max_duration_s: Seconds the whole run may take; then it ends with
                ``finish_reason="max-duration"`` (default: no limit). At most 100 years.
            duration_counts_waiting: True counts time spent waiting for people towards
                ``max_duration_s`` (default False).

        Returns:
            The run's ``AgentStream``: ``run_id``, ``full_stream`` (every chunk), ``text_stream`` (the
            text), and ``await stream.result()`` for the ``RunResult``.

        Raises:
            InvalidOptionError: An option has a wrong value (``max_steps=0``, say).
            DuplicateRunError: ``run_id`` is taken by another run.
            TypeError: An option the way of reaching the agent cannot carry (``started_by`` over HTTP).

        Example:
            >>> stream = await agent.stream("Delete record abc-123", require_tool_approval=True)
            >>> async for chunk in stream.full_stream:
            ...     if chunk.type == "tool-call-approval":
            ...         print(chunk.payload["tool_name"], chunk.payload["args"])
            delete_record {'id': 'abc-123'}
        """
        return await self._start(messages, _options(locals()))

    async def generate(
        self,
        messages: Messages,
        *,
        require_tool_approval: RunPolicy | None = None,
        auto_resume_suspended_tools: bool | None = None,
        thread_id: str | None = None,
        resource_id: str | None = None,
        request_context: dict[str, Any] | None = None,
        max_steps: int | None = None,
        run_id: str | None = None,
        approval_timeout: float | None = None,
        started_by: str | Principal | None = None,
        max_duration_s: float | None = None,
        duration_counts_waiting: bool | None = None,
    ) -> RunResult:
        """Run until the run ends or pauses, and return its result.

        Takes the same options as ``stream``. A run that pauses for a person returns with
        ``finish_reason == "suspended"`` and ``suspend_payload`` naming the call (``tool_call_id``,
        ``tool_name``, ``args``); decide it with ``approve_tool_call_generate`` and the rest.

        Args:
            messages: The user's message, or a list of ``{"role", "content"}`` dicts.
            require_tool_approval: As ``stream``: a bool, or a function deciding per call.
            auto_resume_suspended_tools: As ``stream``.
            thread_id: As ``stream``.
            resource_id: As ``stream``.
            request_context: As ``stream``.
            max_steps: As ``stream`` (default 10).
            run_id: As ``stream`` (default: a new uuid).
            approval_timeout: As ``stream``.
            started_by: As ``stream`` (in-process only).
            max_duration_s: As ``stream``.
            duration_counts_waiting: As ``stream``.

        Returns:
            The ``RunResult``: ``text``, ``finish_reason``, ``suspend_payload``, ``tool_calls``,
            ``tool_results``, ``steps`` and ``usage``.

        Raises:
            InvalidOptionError: An option has a wrong value.
            DuplicateRunError: ``run_id`` is taken by another run.
            RunFailedError: The run ended with an error (the model failed, say).
            TypeError: An option the way of reaching the agent cannot carry.

        Example:
            >>> result = await agent.generate("Delete record abc-123")
            >>> result.finish_reason, result.suspend_payload["tool_name"]
            ('suspended', 'delete_record')
        """
        return await self._start_to_result(messages, _options(locals()))

    # ---- deciding -----------------------------------------------------------------------------------

    async def approve_tool_call(
        self,
        *,
        run_id: str,
        tool_call_id: str | None = None,
        edited_args: dict[str, Any] | None = None,
        fingerprint: str | None = None,
        decided_by: str | Principal | None = None,
        roles: frozenset[str] | None = None,
        surface: str | None = None,
    ) -> AgentStream:
        """Approve a paused tool call: the tool runs (once), and the run goes on.

        The decision is claimed atomically: of two decisions on one call exactly one wins, and the
        other raises ``DecisionConflictError``. An invalid decision claims nothing, and the call stays
        paused.

        Args:
            run_id: The run, as its stream or result gave it (a supervisor's run for a subagent's call).
            tool_call_id: The paused call (the ``tool_call_id`` of its approval chunk); default: the
                run's most recently paused call.
            edited_args: Arguments to run the tool with instead, merged over the model's and validated
                against the tool's input schema (a key it does not have is refused, not dropped); only
                for a tool created with ``allow_edited_args=True``.
            fingerprint: The ``fingerprint`` of the approval chunk: the approval applies only if the
                call still asks exactly that.
            decided_by: Who approves (a name, or a ``Principal``): recorded in the audit log, and
                checked by the agent's approver policies. In-process only: over HTTP the caller's
                credential says who decides.
            roles: The approver's roles, for the approver policies (a ``Principal`` carries its own).
                In-process only.
            surface: Where the decision comes from, for the audit (default ``"python"``). In-process
                only.

        Returns:
            The run's ``AgentStream`` from the decision on.

        Raises:
            SnapshotNotFoundError: No such run of this agent, or it has finished.
            ToolCallNotSuspendedError: The call is not paused, or waits for resume data (use
                ``resume_stream``) rather than an approval.
            DecisionConflictError: The call was decided already, or no longer matches ``fingerprint``
                (``PauseExpiredError`` if it ran out of time, ``RunCancelledError`` if the run was
                cancelled).
            DecisionRejectedError: ``edited_args`` the tool does not accept, or that are invalid (a
                key its input schema does not have, a value that cannot be stored), a
                call in doubt (``ToolCallInDoubtError``), or a run whose step is still in flight on
                another host (``RunInFlightError``: decide again once it has paused); the call stays
                paused.
            ApprovalPolicyError: An approver policy does not let this decider approve this call.
            TypeError: ``decided_by``, ``roles`` or ``surface`` given over HTTP.

        Example:
            >>> approved = await agent.approve_tool_call(run_id=stream.run_id, tool_call_id="call-1")
            >>> (await approved.result()).text
            'Deleted.'
        """
        decision = Decision(Approve(edited_args), tool_call_id, fingerprint, decided_by, roles, surface)
        return await self._decide(run_id, decision)

    async def decline_tool_call(
        self,
        *,
        run_id: str,
        tool_call_id: str | None = None,
        reason: str | None = None,
        fingerprint: str | None = None,
        decided_by: str | Principal | None = None,
        roles: frozenset[str] | None = None,
        surface: str | None = None,
    ) -> AgentStream:
        """Decline a paused tool call: the tool never runs, and the model is told why.

        Args:
            run_id: The run the call belongs to.
            tool_call_id: The paused call; default: the run's most recently paused call.
            reason: What the model is told (default "Tool call was not approved by the user").
            fingerprint: Decline only if the call still asks exactly what its chunk showed.
            decided_by: Who declines (in-process only; recorded in the audit log).
            roles: The decider's roles, for the approver policies (in-process only).
            surface: Where the decision comes from, for the audit (in-process only).

        Returns:
            The run's ``AgentStream`` from the decision on: the model's next turn.

        Raises:
            SnapshotNotFoundError: No such run of this agent, or it has finished.
            ToolCallNotSuspendedError: The call is not paused.
            DecisionConflictError: The call was decided already, or no longer matches ``fingerprint``.
            RunInFlightError: The run's step is still in flight on another host; decide again once it
                has paused (the call stays paused).
            ApprovalPolicyError: An approver policy does not let this decider decide this call.
            TypeError: ``decided_by``, ``roles`` or ``surface`` given over HTTP.

        Example:
            >>> declined = await agent.decline_tool_call(run_id=run_id, reason="not this one")
        """
        decision = Decision(Decline(reason), tool_call_id, fingerprint, decided_by, roles, surface)
        return await self._decide(run_id, decision)

    async def approve_tool_call_generate(
        self,
        *,
        run_id: str,
        tool_call_id: str | None = None,
        edited_args: dict[str, Any] | None = None,
        fingerprint: str | None = None,
        decided_by: str | Principal | None = None,
        roles: frozenset[str] | None = None,
        surface: str | None = None,
    ) -> RunResult:
        """Approve a paused tool call, and return the result once the run ends or pauses again.

        Args:
            run_id: The run the call belongs to.
            tool_call_id: The paused call; default: the run's most recently paused call.
            edited_args: As ``approve_tool_call`` (tools with ``allow_edited_args=True`` only).
            fingerprint: Approve only if the call still asks exactly what its chunk showed.
            decided_by: Who approves (in-process only).
            roles: The approver's roles (in-process only).
            surface: Where the decision comes from (in-process only).

        Returns:
            The ``RunResult`` after the decision.

        Raises:
            SnapshotNotFoundError: No such run of this agent, or it has finished.
            ToolCallNotSuspendedError: The call is not paused, or waits for resume data.
            DecisionConflictError: The call was decided already, or no longer matches ``fingerprint``.
            DecisionRejectedError: ``edited_args`` the tool does not accept, or invalid.
            ApprovalPolicyError: An approver policy does not let this decider approve this call.
            RunFailedError: The run ended with an error after the decision.
            TypeError: ``decided_by``, ``roles`` or ``surface`` given over HTTP.

        Example:
            >>> paused = await agent.generate("Delete record abc-123")
            >>> done = await agent.approve_tool_call_generate(run_id=paused.run_id)
            >>> done.finish_reason
            'stop'
        """
        decision = Decision(Approve(edited_args), tool_call_id, fingerprint, decided_by, roles, surface)
        return await self._decide_to_result(run_id, decision)

    async def decline_tool_call_generate(
        self,
        *,
        run_id: str,
        tool_call_id: str | None = None,
        reason: str | None = None,
        fingerprint: str | None = None,
        decided_by: str | Principal | None = None,
        roles: frozenset[str] | None = None,
        surface: str | None = None,
    ) -> RunResult:
        """Decline a paused tool call, and return the result once the run ends or pauses again.

        Args:
            run_id: The run the call belongs to.
            tool_call_id: The paused call; default: the run's most recently paused call.
            reason: What the model is told (default "Tool call was not approved by the user").
            fingerprint: Decline only if the call still asks exactly what its chunk showed.
            decided_by: Who declines (in-process only).
            roles: The decider's roles (in-process only).
            surface: Where the decision comes from (in-process only).

        Returns:
            The ``RunResult`` after the decision.

        Raises:
            SnapshotNotFoundError: No such run of this agent, or it has finished.
            ToolCallNotSuspendedError: The call is not paused.
            DecisionConflictError: The call was decided already, or no longer matches ``fingerprint``.
            ApprovalPolicyError: An approver policy does not let this decider decide this call.
            RunFailedError: The run ended with an error after the decision.
            TypeError: ``decided_by``, ``roles`` or ``surface`` given over HTTP.
        """
        decision = Decision(Decline(reason), tool_call_id, fingerprint, decided_by, roles, surface)
        return await self._decide_to_result(run_id, decision)

    async def resume_stream(
        self,
        resume_data: Any,
        *,
        run_id: str,
        tool_call_id: str | None = None,
        fingerprint: str | None = None,
        decided_by: str | Principal | None = None,
        roles: frozenset[str] | None = None,
        surface: str | None = None,
    ) -> AgentStream:
        """Answer a tool that paused itself with ``suspend()``: it is called again with the answer.

        The tool reads the answer as ``ctx.agent.resume_data``. An approval pause may be answered this
        way too, with ``{"approved": bool, "reason": str}``.

        Args:
            resume_data: The answer, validated against the tool's ``resume_schema``.
            run_id: The run the call belongs to.
            tool_call_id: The paused call; default: the run's most recently paused call.
            fingerprint: Answer only if the call still asks exactly what its chunk showed.
            decided_by: Who answers (in-process only; recorded in the audit log).
            roles: The decider's roles (in-process only).
            surface: Where the answer comes from (in-process only).

        Returns:
            The run's ``AgentStream`` from the answer on.

        Raises:
            SnapshotNotFoundError: No such run of this agent, or it has finished.
            ToolCallNotSuspendedError: The call is not paused.
            ResumeDataValidationError: The answer does not fit the tool's ``resume_schema``; the call
                stays paused.
            DecisionConflictError: The call was answered already, or no longer matches ``fingerprint``.
            RunInFlightError: The run's step is still in flight on another host; answer again once it
                has paused (the call stays paused).
            TypeError: ``decided_by``, ``roles`` or ``surface`` given over HTTP.

        Example:
            >>> answered = await agent.resume_stream({"city": "Paris"}, run_id=run_id)
        """
        decision = Decision(Resume(resume_data), tool_call_id, fingerprint, decided_by, roles, surface)
        return await self._decide(run_id, decision)

    async def resume_generate(
        self,
        resume_data: Any,
        *,
        run_id: str,
        tool_call_id: str | None = None,
        fingerprint: str | None = None,
        decided_by: str | Principal | None = None,
        roles: frozenset[str] | None = None,
        surface: str | None = None,
    ) -> RunResult:
        """Answer a tool paused by ``suspend()``, and return the result once the run ends or pauses again.

        Args:
            resume_data: The answer, validated against the tool's ``resume_schema``.
            run_id: The run the call belongs to.
            tool_call_id: The paused call; default: the run's most recently paused call.
            fingerprint: Answer only if the call still asks exactly what its chunk showed.
            decided_by: Who answers (in-process only).
            roles: The decider's roles (in-process only).
            surface: Where the answer comes from (in-process only).

        Returns:
            The ``RunResult`` after the answer.

        Raises:
            SnapshotNotFoundError: No such run of this agent, or it has finished.
            ToolCallNotSuspendedError: The call is not paused.
            ResumeDataValidationError: The answer does not fit the tool's ``resume_schema``.
            DecisionConflictError: The call was answered already, or no longer matches ``fingerprint``.
            RunFailedError: The run ended with an error after the answer.
            TypeError: ``decided_by``, ``roles`` or ``surface`` given over HTTP.

        Example:
            >>> asked = await agent.generate("What's the weather?")
            >>> done = await agent.resume_generate({"city": "Paris"}, run_id=asked.run_id)
        """
        decision = Decision(Resume(resume_data), tool_call_id, fingerprint, decided_by, roles, surface)
        return await self._decide_to_result(run_id, decision)

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

        Args:
            thread_id: The thread the run was started on.
            resource_id: The thread's resource (None for a thread without one).
            approved: True approves (or answers, with ``resume_data``); False declines.
            tool_call_id: The paused call; needed when several runs on the thread are paused.
            reason: What the model is told when declined.
            resume_data: Answers a tool paused by ``suspend()`` (only with ``approved=True``).
            decided_by: Who decides (in-process only).
            roles: The decider's roles (in-process only).
            surface: Where the decision comes from (in-process only).

        Returns:
            The run's ``AgentStream`` from the decision on.

        Raises:
            NoSuspendedRunError: No run on the thread waits for a decision.
            AmbiguousSuspendedRunsError: Several runs on the thread wait, and ``tool_call_id`` was not
                given to say which.
            DecisionRejectedError: ``resume_data`` with ``approved=False``, or resume data answering an
                approval with ``{"approved": false}`` (``ResumeDataValidationError``).
            DecisionConflictError: The call was decided already.
            TypeError: ``decided_by``, ``roles`` or ``surface`` given over HTTP.

        Example:
            >>> await agent.send_tool_approval(thread_id="t1", resource_id="u1", approved=True)
        """
        if resume_data is not None and not approved:
            raise DecisionRejectedError(
                "resume_data answers a paused tool and cannot come with approved=False; "
                "to decline, pass approved=False without resume_data"
            )
        what: Approve | Decline | Resume = Approve() if approved else Decline(reason)
        if resume_data is not None:
            what = Resume(resume_data, approved=True)
        decision = Decision(what, tool_call_id, None, decided_by, roles, surface)
        return await self._decide_on_thread(thread_id, resource_id, decision)

    # ---- finding and cancelling runs ----------------------------------------------------------------

    async def list_suspended_runs(
        self,
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
        from_date: datetime | None = None,
        to_date: datetime | None = None,
        page: int | None = None,
        per_page: int | None = None,
        cursor: str | None = None,
    ) -> SuspendedRunList:
        """One page of this agent's runs that wait for a person, newest pause first.

        Every filter given must match.

        Args:
            thread_id: Only runs on this thread.
            resource_id: Only runs of this resource.
            from_date: Only runs paused at or after this time.
            to_date: Only runs paused at or before this time.
            page: The page, counted from 0 (with ``per_page``).
            per_page: Runs per page (default 100).
            cursor: The ``next_cursor`` of the page before: the page after it, with the same filters.

        Returns:
            A ``SuspendedRunList``: ``runs`` (each with ``run_id``, ``thread_id``, ``resource_id``,
            ``suspended_at`` and its waiting ``tool_calls``), ``total`` and ``next_cursor``.

        Raises:
            InvalidPaginationError: A page, size or cursor that is out of range or malformed.
            InvalidOptionError: A ``thread_id`` or ``resource_id`` that is not a string.

        Example:
            >>> waiting = await agent.list_suspended_runs(thread_id="t1")
            >>> [run.run_id for run in waiting.runs]
        """
        filters = _given(
            thread_id=thread_id,
            resource_id=resource_id,
            from_date=from_date,
            to_date=to_date,
            page=page,
            per_page=per_page,
            cursor=cursor,
        )
        return await self._list_suspended(cast(SuspendedRunFilters, filters))

    async def cancel_run(
        self,
        run_id: str,
        *,
        reason: str | None = None,
        tool_call_id: str | None = None,
        fingerprint: str | None = None,
        cancelled_by: str | Principal | None = None,
        roles: frozenset[str] | None = None,
        surface: str | None = None,
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
            run_id: The run to cancel (a top-level run, or a subagent's).
            reason: Why; recorded in the audit log and told (default "The run was cancelled").
            tool_call_id: With ``fingerprint``: cancel only while this call still waits as it was seen
                (against an approval of it, exactly one of the two wins).
            fingerprint: The fingerprint of that call's pause.
            cancelled_by: Who cancels: the run's starter, an admin, or an approver its approver policies
                name (None, the default, is this process itself). In-process only.
            roles: The canceller's roles, for the approver policies. In-process only.
            surface: Where the cancel comes from, for the audit (default ``"python"``). In-process only.

        Returns:
            ``CancelledRun``: who cancelled, why, when, and where the run stood (``was``).

        Raises:
            RunCancelledError: The run was cancelled already (409; a retry of the same cancel by the
                same canceller is answered as the first was).
            RunNotCancellableError: The run has already finished (409).
            SnapshotNotFoundError: No such run of this agent (404).
            CancelForbiddenError: ``cancelled_by`` may not cancel it (403).
            DecisionConflictError: The call given by ``tool_call_id`` was decided first (409, naming who).
            TypeError: ``cancelled_by``, ``roles`` or ``surface`` given over HTTP.

        Example:
            >>> stream = await agent.stream("pay the vendor")
            >>> await agent.cancel_run(stream.run_id, reason="wrong vendor")
            >>> (await stream.result()).finish_reason
            'cancelled'
        """
        cancel = CancelCall(reason, tool_call_id, fingerprint, cancelled_by, roles, surface)
        return await self._cancel(run_id, cancel)

    # ---- what each way of reaching an agent provides ------------------------------------------------

    async def _start(self, messages: Messages, options: StreamOptions) -> AgentStream:
        """Start a run with the options given (omitted ones absent) and stream it."""
        raise NotImplementedError

    async def _start_to_result(self, messages: Messages, options: StreamOptions) -> RunResult:
        """Start a run and return its result when it ends or pauses."""
        raise NotImplementedError

    async def _decide(self, run_id: str, decision: Decision) -> AgentStream:
        """Apply ``decision`` to a paused call of ``run_id`` and stream what follows."""
        raise NotImplementedError

    async def _decide_to_result(self, run_id: str, decision: Decision) -> RunResult:
        """Apply ``decision`` and return the result when the run ends or pauses again."""
        raise NotImplementedError

    async def _decide_on_thread(
        self, thread_id: str, resource_id: str | None, decision: Decision
    ) -> AgentStream:
        """Apply ``decision`` to the paused call of the run suspended on the thread."""
        raise NotImplementedError

    async def _list_suspended(self, filters: SuspendedRunFilters) -> SuspendedRunList:
        """One page of the agent's suspended runs matching ``filters`` (omitted ones absent)."""
        raise NotImplementedError

    async def _cancel(self, run_id: str, cancel: CancelCall) -> CancelledRun:
        """Cancel ``run_id``; return once the cancel is durable."""
        raise NotImplementedError


def _given(**values: Any) -> dict[str, Any]:
    return {name: value for name, value in values.items() if value is not None}


def _options(arguments: dict[str, Any]) -> StreamOptions:
    """A start's options among ``stream``'s or ``generate``'s arguments (their ``locals()``): each of
    ``StreamOptions`` that was given (not None)."""
    return cast(StreamOptions, _given(**{name: arguments[name] for name in StreamOptions.__optional_keys__}))


__all__ = ["CancelCall", "Decision", "RunMethods"]
