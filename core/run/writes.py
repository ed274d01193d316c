"""Writing a run: one atomic store write carries the run's state with its audit entries, the messages
its thread gains and the notifications all of these make (``troupe.core.notifying.outbox``).

So a notification is never written without the state change it reports, nor a state change without its
notification: a crash between two writes could otherwise leave a paused run that nobody is ever told
about. The claim of a decision and every checkpoint of the loop write through here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from troupe.core.notifying.outbox import Event, Notifications, decision_event
from troupe.core.vocabulary.run_record import RunRecord
from troupe.core.vocabulary.state import RunState
from troupe.core.vocabulary.store import AuditEntry, OutboxEntry, Store, ThreadAppend


class Prepared(NamedTuple):
    """A write taken at one moment: the run's record (its state serialized once) and the notifications
    the write carries. Written later as it was taken, whatever the run has become meanwhile."""

    record: RunRecord
    outbox: tuple[OutboxEntry, ...]


class RunWriter:
    """Writes the runs of one agent to ``store``, with the notifications ``notifications`` asks for."""

    def __init__(self, store: Store, notifications: Notifications | None = None) -> None:
        self.store = store
        self.notifications = notifications
        # Called after a write that added outbox entries (the host's dispatcher sends them).
        self.on_outbox: Callable[[], None] = lambda: None

    async def save(
        self,
        state: RunState,
        *,
        expected_version: int,
        audit: tuple[AuditEntry, ...] = (),
        thread: ThreadAppend | None = None,
        events: Sequence[Event] = (),
    ) -> int:
        """Compare-and-set the run on ``expected_version``, with its audit entries and, in the same
        atomic step, the notifications that they and ``events`` make; returns the new version."""
        prepared = self.prepare(state, audit, events)
        return await self.write(prepared, expected_version=expected_version, audit=audit, thread=thread)

    def prepare(
        self, state: RunState, audit: Sequence[AuditEntry] = (), events: Sequence[Event] = ()
    ) -> Prepared:
        """The write of ``state`` as it is now, with the notifications that ``audit`` and ``events``
        make: the state is serialized here, once (``RunRecord``), and nothing of it is read again."""
        return Prepared(RunRecord.of(state), self.outbox(state, audit, events))

    async def write(
        self,
        prepared: Prepared,
        *,
        expected_version: int,
        audit: tuple[AuditEntry, ...] = (),
        thread: ThreadAppend | None = None,
    ) -> int:
        """Compare-and-set a prepared write on ``expected_version``, with ``audit`` and ``thread`` in the
        same atomic step; returns the new version."""
        outbox = prepared.outbox
        # Only when there is something to send, so a store written to the older protocol keeps working.
        extra: dict[str, tuple[OutboxEntry, ...]] = {"outbox": outbox} if outbox else {}
        version = await self.store.save_run(
            prepared.record, expected_version=expected_version, audit=audit, thread=thread, **extra
        )
        if outbox:
            self.on_outbox()
        return version

    @property
    def notifying(self) -> bool:
        """Whether writes carry notifications: if not, a caller need not build the events it would pass
        (a pause's event data costs more than the rest of its checkpoint's preparation)."""
        return self.notifications is not None and bool(self.notifications.targets)

    def outbox(
        self, state: RunState, audit: Sequence[AuditEntry], events: Sequence[Event] = ()
    ) -> tuple[OutboxEntry, ...]:
        notifications = self.notifications if self.notifying else None
        if notifications is None:
            return ()
        # A subagent's decisions are reported by the top-level run that routed them; a cancel's entry for
        # the run as a whole (no call) announces nothing: each pause it withdrew has an event of its own.
        decided = (
            [decision_event(state, entry) for entry in audit if entry.tool_call_id]
            if state.parent is None
            else []
        )
        return notifications.entries([*events, *decided])


__all__ = ["Prepared", "RunWriter"]
