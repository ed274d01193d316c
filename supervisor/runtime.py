"""Runtime: the agents, their hosts (Ray actors or in-process) and the store, as one unit.

The Mastra-instance analogue: register agents, get them back bound to this runtime's storage and
actors. Hosts are created on first use, one per agent definition (a supervisor and each subagent),
subagents first so a supervisor's host is born knowing how to reach them.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, Literal

from troupe.actors.a2a.agent import A2AAgent
from troupe.actors.a2a.handle import A2AHandle
from troupe.actors.handle import AgentHandle, LocalHandle, RayHandle
from troupe.actors.host import OWNER_TTL_S, AgentHost
from troupe.actors.remote import RayActor, ensure_ray
from troupe.core.deciding.approvers import ApproverPolicies, ApproverPolicy
from troupe.core.deciding.cancelling import DEFAULT_REASON, as_recorded, outcome
from troupe.core.notifying.outbox import Notifications, NotificationTarget
from troupe.core.run.agent import AgentSpec
from troupe.core.run.settings import (
    DEFAULT_IN_DOUBT_MARGIN_S,
    DEFAULT_IN_DOUBT_S,
    Durability,
    RunSettings,
)
from troupe.core.tracing import carrier
from troupe.core.vocabulary.errors import (
    AgentNotFoundError,
    AmbiguousSuspendedRunsError,
    DeliveryNotFoundError,
    NoSuspendedRunError,
    SnapshotNotFoundError,
)
from troupe.core.vocabulary.identity import Principal
from troupe.core.vocabulary.listing import DEFAULT_PER_PAGE, PausedPage, PausedQuery, page_window
from troupe.core.vocabulary.pause_shapes import suspended_list, suspended_run
from troupe.core.vocabulary.requests import (
    Cancel,
    CancelledRun,
    CancelRequest,
    DecideRequest,
    StartRequest,
)
from troupe.core.vocabulary.results import RunResult
from troupe.core.vocabulary.state import Clock, utcnow
from troupe.core.vocabulary.store import OutboxEntry, Store, SuspendedRunQuery, suspended_runs
from troupe.core.vocabulary.stream import AgentStream
from troupe.core.vocabulary.suspended import SuspendedRunList
from troupe.core.vocabulary.tool_threads import DEFAULT_TOOL_THREADS
from troupe.storage.memory import MemoryStore
from troupe.storage.scratch import ScratchStore
from troupe.supervisor.agent import Agent
from troupe.supervisor.cancel_route import route_of
from troupe.supervisor.placement import check_actor_options, check_replicas, options_for
from troupe.supervisor.reconciler import Reconciler

Executor = Literal["ray", "local"]


class Runtime:
    """The agents, their hosts and the store, as one unit: what runs an application's agents.

    Register agents (at construction or with ``register``) and get them back with ``get_agent``, bound
    to this runtime's store and actors. Hosts are made on first use, one per agent definition (Ray
    actors by default, or in-process with ``executor="local"``). Call ``shutdown`` when done: paused
    runs stay in a durable store, and a new runtime on the same store picks them up.

    Args:
        agents: The agents, as a list or a dict (a key is another name ``get_agent`` knows the agent
            by); their subagents are registered too.
        storage: Where runs, decisions and threads are kept: ``MemoryStore()`` (the default; gone with
            the process), ``SqliteStore(path)`` or ``RedisStore.from_url(url)``.
        executor: ``"ray"`` (the default) runs each agent in Ray actors; ``"local"`` runs the same hosts
            in this process (tests, quick notebooks).
        ray_address: A Ray cluster to join (default: Troupe starts a private Ray of its own).
        actor_options: Ray actor options per agent id (``"*"``: every other agent), such as
            ``num_cpus`` or a node's resources; see docs/how-to/ray.md.
        replicas: How many actors serve an agent, by agent id (default one); any of them takes any of
            its runs and decisions.
        notifications: Where pause and decision events are sent: ``Notifications`` or a list of
            ``NotificationTarget`` (signed webhooks from a durable outbox).
        approver_policies: Who may decide which calls (``ApproverPolicy``: roles, separation of duties,
            quorum).
        clock: What "now" is (tests pass a clock they move by hand).
        tool_threads: How many sync tool calls each agent's host runs at once (each in a worker thread;
            more wait for a free one). Async tools run on the host's event loop and are not counted.
        durability: When runs are written (LangGraph's names; docs/concepts/life-of-a-pause.md, "When a
            run is written"). ``"sync"`` (the default): at its start and after every step as well.
            ``"exit"``: only at pauses, before tools run and at the end; two store writes fewer per
            approval cycle, but a crash during a model turn reports the step's tool calls as
            interrupted instead of keeping their results, and a run that crashes before its first write
            is lost rather than recovered.
        in_doubt_default_s: A gated call taken over from a host that may still be running it (its
            lease ran out: a storage outage, say) is in doubt, neither run again nor declined, until
            its deadline: the tool's ``timeout_s`` from when it started, or this (300 s) for a tool
            without one, plus ``in_doubt_margin_s``; see docs/how-to/cancel.md, "Calls in doubt".
        in_doubt_margin_s: The margin added to that deadline (5 s).

    Raises:
        ValueError: An unknown ``executor`` or ``durability``, or two different agents with one id.
        InvalidOptionError: ``actor_options`` or ``replicas`` an agent cannot take.

    Example:
        >>> runtime = Runtime([agent], storage=SqliteStore("runs.db"), executor="local")
        >>> records = runtime.get_agent("records")
        >>> paused = await records.generate("Delete abc-123")
        >>> await runtime.shutdown()
    """

    def __init__(
        self,
        agents: Sequence[Agent] | Mapping[str, Agent] | None = None,
        storage: Store | None = None,
        executor: Executor = "ray",
        ray_address: str | None = None,
        actor_options: Mapping[str, Mapping[str, Any]] | None = None,
        replicas: Mapping[str, int] | None = None,
        notifications: Notifications | Sequence[NotificationTarget] | None = None,
        approver_policies: ApproverPolicies | Sequence[ApproverPolicy] | None = None,
        clock: Clock = utcnow,
        tool_threads: int = DEFAULT_TOOL_THREADS,
        durability: Durability = "sync",
        in_doubt_default_s: float = DEFAULT_IN_DOUBT_S,
        in_doubt_margin_s: float = DEFAULT_IN_DOUBT_MARGIN_S,
    ) -> None:
        if executor not in ("ray", "local"):
            raise ValueError(f"executor must be 'ray' or 'local', got {executor!r}")
        # How every agent host drives its runs: where pauses and decisions are announced (signed webhooks
        # from a durable outbox), who may decide what (troupe.core.deciding.approvers), and the rest.
        policies = ApproverPolicies.of(approver_policies)
        self.settings = RunSettings(
            _notifications(notifications),
            policies,
            clock,
            tool_threads,
            durability,
            in_doubt_default_s,
            in_doubt_margin_s,
        )
        self.storage: Store = storage if storage is not None else MemoryStore()
        self.executor: Executor = executor
        self.ray_address = ray_address
        # Ray actor options per agent id ("*": every other agent), see troupe.supervisor.placement.
        self.actor_options = check_actor_options(actor_options)
        # How many actors serve an agent (default one): any of them takes any of its runs and decisions.
        self.replicas = check_replicas(replicas)
        self._specs: dict[str, AgentSpec] = {}
        self._agents: dict[str, Agent] = {}
        self._handles: dict[str, AgentHandle] = {}
        self._store: Store | None = None
        # Actor names are unique to this runtime: two runtimes (or two processes) never share one.
        self._id = uuid.uuid4().hex[:12]
        self._spawned = itertools.count(1)
        # Supervision of this runtime's hosts (takeover of dead hosts' runs, expiry): one loop, started
        # with the first host on the caller's event loop.
        self.reconciler = Reconciler(lambda: dict(self._handles), self.store, clock)
        self._register_all(agents)

    @property
    def notifications(self) -> Notifications | None:
        """Where this runtime's pause and decision events are sent (None: nowhere)."""
        return self.settings.notifications

    @property
    def approver_policies(self) -> ApproverPolicies | None:
        """Who may decide which calls of this runtime's agents (None: anyone who may reach them)."""
        return self.settings.policies

    # ---- agents -------------------------------------------------------------------------------------

    def _register_all(self, agents: Sequence[Agent] | Mapping[str, Agent] | None) -> None:
        if agents is not None and not isinstance(agents, Mapping | Sequence):
            raise TypeError(
                "Runtime: agents must be a list of Agents or a dict of id -> Agent, "
                f"got {type(agents).__name__}"
            )
        items = agents.items() if isinstance(agents, Mapping) else ((None, a) for a in agents or ())
        for key, agent in items:
            self.register(agent, alias=key)

    def register(self, agent: Agent, *, alias: str | None = None, replace: bool = False) -> Agent:
        """Add an agent (and its subagents) and return it bound to this runtime.

        Args:
            agent: The agent.
            alias: Another name ``get_agent`` knows it by.
            replace: Replace an agent registered with the same id (default: that is an error).

        Returns:
            The agent, bound to this runtime (a copy if it was bound to another one).

        Raises:
            TypeError: ``agent`` is not an ``Agent``.
            ValueError: Another agent with the same id is registered, and ``replace`` is False.
        """
        if not isinstance(agent, Agent):
            raise TypeError(f"Runtime: {agent!r} is a {type(agent).__name__}, not an Agent")
        for spec in agent.tree().values():
            known = self._specs.get(spec.id)
            if known is not None and known is not spec:
                if not replace:
                    raise ValueError(f"another agent with id {spec.id!r} is already registered")
                self._handles.pop(spec.id, None)
            self._specs[spec.id] = spec
            if spec is not agent and isinstance(spec, Agent) and spec.id not in self._agents:
                self._agents[spec.id] = spec.bound_to(self)  # subagents can be run and listed directly too
        bound = agent.bound_to(self)
        self._agents[agent.id] = bound
        if alias is not None:
            self._agents[alias] = bound
        return bound

    def get_agent(self, id: str) -> Agent:
        """The registered agent with this id (or alias), bound to this runtime.

        Args:
            id: The agent's id, or the key it was registered under.

        Returns:
            The agent; its run methods use this runtime's store and actors.

        Raises:
            AgentNotFoundError: No agent is registered under ``id`` (the message lists those that are).
        """
        try:
            return self._agents[id]
        except KeyError:
            raise AgentNotFoundError(
                f"no agent {id!r} in this runtime; registered: {', '.join(sorted(self._agents)) or 'none'}",
                agent_id=id,
            ) from None

    def list_agents(self) -> list[Agent]:
        """Every registered agent, subagents included, each once."""
        return list({id(a): a for a in self._agents.values()}.values())

    # ---- hosts and store ----------------------------------------------------------------------------

    def store(self) -> Store:
        """The store as this runtime's hosts see it (starting or joining Ray first, on Ray).

        On Ray, a store that lives in one process (the default ``MemoryStore``) is stood in for by a
        private SQLite file every actor opens, removed at shutdown (``troupe.storage.scratch``).

        Returns:
            The store the runtime's hosts read and write.

        Raises:
            RayAuthError: Ray refused this process's token, or there is none to present.
        """
        if self._store is None:
            if self.executor == "ray":
                ensure_ray(self.ray_address)
            if self.executor == "ray" and not getattr(self.storage, "shared_across_processes", True):
                self._store = ScratchStore()
            else:
                self._store = self.storage
        return self._store

    def use_notifications(self, notifications: Notifications | None) -> None:
        """Set where events go (``troupe serve --notify``), before the first host is made.

        Args:
            notifications: The targets (None: nowhere).

        Raises:
            RuntimeError: The runtime's agents have been used already.
        """
        if self._handles:
            raise RuntimeError("notifications must be set before the runtime's agents are used")
        self.settings = replace(self.settings, notifications=notifications)

    def _actor_name(self, what: str) -> str:
        return f"{self._id}:{what}:{next(self._spawned)}"

    def handle(self, agent_id: str) -> AgentHandle:
        """How this runtime reaches an agent's host (made on first use, subagents' first).

        Args:
            agent_id: The agent's id.

        Returns:
            The agent's host handle (its Ray actors, or an in-process host).

        Raises:
            AgentNotFoundError: No such agent in this runtime.
        """
        # Every use supervises on the caller's loop: a runtime may outlive one (``asyncio.run`` twice).
        self.reconciler.ensure_running()
        found = self._handles.get(agent_id)
        if found is not None:
            return found
        spec = self._specs.get(agent_id)
        if spec is None:
            raise AgentNotFoundError(f"no agent {agent_id!r} in this runtime", agent_id=agent_id)
        subagents = {key: self.handle(sub.id) for key, sub in spec.agents.items()}
        handle: AgentHandle
        if isinstance(spec, A2AAgent):  # a remote agent: reached from whichever host delegates to it
            handle = A2AHandle(spec, self.store())
        elif self.executor == "ray":
            handle = self._ray_handle(spec, subagents)
        else:
            handle = self._local_handle(spec, subagents)
        self._handles[agent_id] = handle
        return handle

    def _ray_handle(self, spec: AgentSpec, subagents: Mapping[str, AgentHandle]) -> AgentHandle:
        """The agent's actors (``replicas`` of them, each serving any of its runs) behind one handle."""
        options, store = options_for(self.actor_options, spec.id), self.store()
        actors = [
            RayActor.spawn(
                AgentHost,
                spec,
                store,
                subagents,
                None,
                self.settings,
                name=self._actor_name(f"agent:{spec.id}"),  # each replica its own
                replaceable=True,
                **options,
            )
            for _ in range(self.replicas.get(spec.id, 1))
        ]
        return RayHandle(actors, spec.id)

    def _local_handle(self, spec: AgentSpec, subagents: Mapping[str, AgentHandle]) -> AgentHandle:
        return LocalHandle(AgentHost(spec, self.store(), dict(subagents), settings=self.settings))

    async def recover(self, wait_s: float | None = None) -> dict[str, list[str]]:
        """Pick up every run of this runtime's agents that a dead process left in flight.

        Each carries on from its last checkpoint. Call it at start-up; it also starts this runtime's
        hosts and its reconciler. Runs another live process drives are left alone.

        Args:
            wait_s: How long to wait out the lease of a process that died moments ago (default: one
                lease lifetime).

        Returns:
            The recovered run ids, per agent.
        """
        handles = {agent_id: self.handle(agent_id) for agent_id in self._specs}
        return await self.reconciler.recover(handles, OWNER_TTL_S + 1.0 if wait_s is None else wait_s)

    async def expire_due(self) -> dict[str, list[str]]:
        """Decline now every pause whose ``approval_timeout`` has run out.

        The reconciler also does this every couple of seconds.

        Returns:
            The affected run ids, per agent.
        """
        return await self.reconciler.expire_due({agent_id: self.handle(agent_id) for agent_id in self._specs})

    async def shutdown(self) -> None:
        """Stop this runtime's actors and close its store. Paused runs stay in a durable store.

        A run in flight is picked up (from its last checkpoint) by the next runtime on the same store
        that calls ``recover``.
        """
        await self.reconciler.close()
        handles, self._handles = self._handles, {}
        for handle in handles.values():
            await handle.close()
        if self._store is not None and self._store is not self.storage:
            await self._store.close()
        self._store = None
        await self.storage.close()

    # ---- operations (the public Agent's methods land here) ------------------------------------------

    async def stream(self, agent_id: str, request: StartRequest) -> AgentStream:
        """Start a run of an agent and stream it (``Agent.stream`` calls this; use that).

        Args:
            agent_id: The agent.
            request: The start, as ``Agent.start_request`` makes it.

        Returns:
            The run's stream.
        """
        return await AgentStream.open(await self.handle(agent_id).start(request))

    async def generate(self, agent_id: str, request: StartRequest) -> RunResult:
        """Start a run of an agent and return its result (``Agent.generate`` calls this; use that).

        Args:
            agent_id: The agent.
            request: The start, as ``Agent.start_request`` makes it.

        Returns:
            The result once the run ends or pauses.

        Raises:
            RunFailedError: The run ended with an error.
        """
        return (await self.handle(agent_id).generate(request)).raise_for_error()

    async def decide(self, agent_id: str, request: DecideRequest) -> AgentStream:
        """Apply a decision and stream what follows (``Agent``'s decision methods call this; use them).

        Args:
            agent_id: The agent whose run it is.
            request: The decision and the call it is for.

        Returns:
            The run's stream from the decision on.
        """
        return await AgentStream.open(await self.handle(agent_id).decide(request), request.run_id)

    async def observe(self, agent_id: str, run_id: str) -> AgentStream:
        """Follow a run from now on (``Agent.observe_stream`` calls this; use that).

        Args:
            agent_id: The agent whose run it is.
            run_id: The run.

        Returns:
            The run's stream from now on.

        Raises:
            SnapshotNotFoundError: No such run, or it has finished.
        """
        batches = await self.handle(agent_id).attach(run_id)
        if batches is None:
            raise SnapshotNotFoundError(
                f"snapshot not found for run {run_id} of agent {agent_id!r}: unknown or already finished",
                run_id=run_id,
            )
        return await AgentStream.open(batches, run_id)

    async def cancel_run(self, agent_id: str, request: CancelRequest) -> CancelledRun:
        """Cancel a run of an agent (``Agent.cancel_run`` calls this; use that).

        A waiting subagent's run is cancelled through the top run (``troupe.supervisor.cancel_route``).

        Args:
            agent_id: The agent whose run it is.
            request: The cancel: the run, why, and who cancels.

        Returns:
            The ``CancelledRun``, once the cancel is durable.
        """
        route = None if request.cascade else await route_of(self.store(), agent_id, request)
        if route is None or route.top.agent_id not in self._specs:
            return await self.handle(agent_id).cancel(request)
        decision = DecideRequest(
            run_id=route.top.run_id,
            decision=Cancel(request.run_id, request.reason),
            tool_call_id=route.tool_call_id,
            fingerprint=route.fingerprint,
            decider=request.canceller,
            surface=request.surface,
            trace=carrier(),
        )
        # Claimed down to the run it cancels once this returns; the top run carries on in its host.
        await self.handle(route.top.agent_id).decide(decision)
        return CancelledRun(
            run_id=request.run_id,
            agent_id=agent_id,
            reason=request.reason or DEFAULT_REASON,
            cancelled_by=request.cancelled_by,
            cancelled_at=utcnow(),
            was="suspended",
        )

    async def decide_generate(self, agent_id: str, request: DecideRequest) -> RunResult:
        """Apply a decision and return the result when the run ends or pauses again.

        ``Agent``'s ``_generate`` decision methods call this; use them.

        Args:
            agent_id: The agent whose run it is.
            request: The decision and the call it is for.

        Returns:
            The run's result after the decision.

        Raises:
            RunFailedError: The run ended with an error.
        """
        return (await self.handle(agent_id).generate_decision(request)).raise_for_error()

    async def deliveries(self, run_id: str) -> list[OutboxEntry]:
        """The run's notifications and where each stands.

        Args:
            run_id: The run (kept after the run is gone).

        Returns:
            Each delivery: its target, its state (pending, delivered, failed), attempts and last error.
        """
        return await self.store().list_deliveries(run_id)

    async def redeliver(self, delivery_id: str) -> OutboxEntry:
        """Send a notification again (delivered, failed or pending), with a fresh retry schedule.

        The hosts' next look at the outbox (every ``poll_s``) sends it.

        Args:
            delivery_id: The delivery, as ``deliveries`` lists it.

        Returns:
            The delivery, pending again.

        Raises:
            DeliveryNotFoundError: No delivery has this id.
        """
        again = await self.store().redeliver(delivery_id, time.time())
        if again is None:
            raise DeliveryNotFoundError(f"no notification delivery {delivery_id!r}", delivery_id=delivery_id)
        return again

    async def list_suspended_runs(
        self,
        agent_id: str,
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
        from_date: datetime | None = None,
        to_date: datetime | None = None,
        page: int | None = None,
        per_page: int | None = None,
        cursor: str | None = None,
    ) -> SuspendedRunList:
        """One page of an agent's suspended runs, newest pause first (``Agent.list_suspended_runs``).

        Args:
            agent_id: The agent.
            thread_id: Only runs on this thread.
            resource_id: Only runs of this resource.
            from_date: Only runs paused at or after this time.
            to_date: Only runs paused at or before this time.
            page: The page, counted from 0.
            per_page: Runs per page (default 100).
            cursor: The ``next_cursor`` of the page before: the page after it.

        Returns:
            The page (``runs``, ``total``, ``next_cursor``).

        Raises:
            InvalidPaginationError: A bad size, page or cursor.
            InvalidOptionError: A ``thread_id`` or ``resource_id`` that is not a string.
        """
        query = SuspendedRunQuery.paged(
            agent_id,
            thread_id=thread_id,
            resource_id=resource_id,
            from_date=from_date,
            to_date=to_date,
            page=page,
            per_page=per_page,
            cursor=cursor,
        )
        return suspended_list(await self.store().list_paused(query.paused(query.limit or DEFAULT_PER_PAGE)))

    async def list_pending(
        self,
        *,
        caller: Principal | None = None,
        resource_ids: Sequence[str] | None = None,
        role: str | None = None,
        from_date: datetime | None = None,
        to_date: datetime | None = None,
        per_page: int | None = None,
        page: int | None = None,
        cursor: str | None = None,
    ) -> SuspendedRunList:
        """One page of every pause waiting for a human across this runtime's agents.

        This is what the inbox lists, and the listing for other surfaces (A2A, AG-UI) to call. Only
        top-level runs are listed (a subagent's pause shows once, on the run it bubbled up to), oldest
        pause first, then run id. The page is read from the store's indexes: its cost depends on the
        page's size and on the agents and resources asked for, not on how many runs wait.

        Args:
            caller: Whose view: one who is not an admin sees only runs of its own resources (default:
                every run).
            resource_ids: Only runs of these resources (within the caller's).
            role: Only runs with an approval whose approver policy names this role.
            from_date: Only runs paused at or after this time.
            to_date: Only runs paused at or before this time.
            per_page: Runs per page (default 100, at most 1,000).
            page: The page, counted from 0; or
            cursor: The ``next_cursor`` of the page before (with the same filters).

        Returns:
            The page (``runs``, ``total``, ``next_cursor``).

        Raises:
            InvalidPaginationError: A bad size, page or cursor.

        Example:
            >>> first = await runtime.list_pending(per_page=50)
            >>> rest = await runtime.list_pending(per_page=50, cursor=first.next_cursor)
        """
        page_read = await self.pending_page(
            caller=caller,
            resource_ids=resource_ids,
            role=role,
            from_date=from_date,
            to_date=to_date,
            per_page=per_page,
            page=page,
            cursor=cursor,
        )
        return suspended_list(page_read)

    async def pending_page(
        self,
        *,
        caller: Principal | None = None,
        resource_ids: Sequence[str] | None = None,
        role: str | None = None,
        from_date: datetime | None = None,
        to_date: datetime | None = None,
        per_page: int | None = None,
        page: int | None = None,
        cursor: str | None = None,
    ) -> PausedPage:
        """``list_pending``'s page as the store gave it: the runs' states, for surfaces that show more.

        Args:
            caller: As ``list_pending``.
            resource_ids: As ``list_pending``.
            role: As ``list_pending``.
            from_date: As ``list_pending``.
            to_date: As ``list_pending``.
            per_page: As ``list_pending``.
            page: As ``list_pending``.
            cursor: As ``list_pending``.

        Returns:
            The store's page of paused runs.

        Raises:
            InvalidPaginationError: A bad size, page or cursor.
        """
        limit, offset = page_window(page, per_page or DEFAULT_PER_PAGE, cursor)
        resources = None if resource_ids is None else tuple(resource_ids)
        if caller is not None and not caller.admin:
            allowed = sorted(caller.resources)
            resources = tuple(r for r in (resources or allowed) if r in caller.resources)
        agents = tuple(sorted({agent.id for agent in self.list_agents()}))
        listing = PausedQuery(
            agents=agents,
            top_level=True,
            resources=resources,
            role=role,
            from_date=from_date,
            to_date=to_date,
            limit=limit or DEFAULT_PER_PAGE,
            offset=offset,
            cursor=cursor,
        )
        return await self.store().list_paused(listing)

    async def run_info(self, agent_id: str, run_id: str) -> dict[str, Any] | None:
        """Whose a run is and where it stands, from its snapshot, or from its audit log once it is gone.

        Args:
            agent_id: The agent whose run it is.
            run_id: The run.

        Returns:
            ``run_id, agent_id, thread_id, resource_id, status`` (status ``cancelled`` comes with
            ``cancelled``: by whom, why, when); None if the agent has no such run (unknown, or finished
            without any decision on record).
        """
        stored = await self.store().load_run(run_id)
        if stored is not None:
            if stored.state.agent_id != agent_id:
                return None
            state = stored.state
            info = state.model_dump(include={"run_id", "agent_id", "thread_id", "resource_id", "status"})
            if state.cancel is not None:
                info.update(status="cancelled", cancelled=outcome(state.cancel)["cancelled"])
            return info
        # Finished and gone: its decisions are still on record, and say whose it was (and if it was
        # cancelled, by whom).
        audit = [e for e in await self.store().list_audit(run_id) if e.agent_id == agent_id]
        if not audit:
            return None
        info = {
            "run_id": run_id,
            "agent_id": agent_id,
            "thread_id": None,
            "resource_id": audit[0].resource_id,
            "status": "finished",
        }
        cancel = next((e for e in audit if e.kind == "cancelled" and not e.tool_call_id), None)
        if cancel is not None:
            info.update(status="cancelled", cancelled=outcome(as_recorded(cancel))["cancelled"])
        return info

    async def find_suspended_run(
        self, agent_id: str, *, thread_id: str, resource_id: str | None, tool_call_id: str | None
    ) -> str:
        """The run ``send_tool_approval`` means: the one on the thread holding ``tool_call_id``, or the
        only paused run on the thread.

        Args:
            agent_id: The agent whose run it is.
            thread_id: The thread.
            resource_id: The thread's resource.
            tool_call_id: The paused call, if the caller named one.

        Returns:
            The run id.

        Raises:
            NoSuspendedRunError: No run on the thread is paused (holding ``tool_call_id``, if given).
            AmbiguousSuspendedRunsError: Several are, and ``tool_call_id`` was not given.
        """
        query = SuspendedRunQuery.paged(agent_id, thread_id=thread_id, resource_id=resource_id)
        states, _ = await suspended_runs(self.store(), query)  # every run on the thread, a page at a time
        runs = [suspended_run(s) for s in states]
        if tool_call_id is not None:
            runs = [r for r in runs if any(p.tool_call_id == tool_call_id for p in r.pending)]
        if not runs:
            raise NoSuspendedRunError(
                f"no suspended run of agent {agent_id!r} on thread {thread_id!r}"
                + (f" has tool call {tool_call_id!r} paused" if tool_call_id else ""),
                thread_id=thread_id,
            )
        if len(runs) > 1:
            raise AmbiguousSuspendedRunsError(
                f"{len(runs)} runs of agent {agent_id!r} are suspended on thread {thread_id!r} "
                f"({', '.join(r.run_id for r in runs)}); pass tool_call_id to choose one",
                run_ids=[r.run_id for r in runs],
            )
        return runs[0].run_id


def _notifications(given: Notifications | Sequence[NotificationTarget] | None) -> Notifications | None:
    return given if isinstance(given, Notifications) or given is None else Notifications(tuple(given))


__all__ = ["Executor", "Runtime"]
