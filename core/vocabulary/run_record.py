"""A run's state as a store keeps it: its JSON, taken once, and what the store's indexes are built from.

A write serializes the state once, into the form every store keeps (JSON text), and reads, at the same
moment, the fields the store files it under: its status, agent, thread and resource, whether it is
top-level, when it paused and when that pause expires, the listings it belongs to (``index_keys``) and
the approver roles its pauses name. A write sent ahead (``ActiveRun.send_ahead``) takes its record
before the run goes on, and the store writes that record later, whatever the run has become meanwhile:
the record shares nothing with the live state.
"""

from __future__ import annotations

from dataclasses import dataclass

from troupe.core.vocabulary.listing import IndexKey, index_keys, pause_roles
from troupe.core.vocabulary.state import RunState


def pause_timestamp(state: RunState) -> float | None:
    """When the run started waiting for a human (epoch seconds), the key the suspended index sorts by."""
    at = state.suspended_at
    return at.timestamp() if at is not None else None


def expiry_timestamp(state: RunState) -> float | None:
    """When the run's first open pause expires (epoch seconds), the key the expiry index sorts by."""
    at = state.expires_at
    return at.timestamp() if at is not None else None


@dataclass(frozen=True, slots=True)
class RunRecord:
    """A run's state at one moment, serialized, with the fields a store files it under.

    ``RunRecord.of(state)`` is the only way one is made; a store given a ``RunState`` makes its own.

    Example:
        >>> record = RunRecord.of(state)
        >>> record.json == state.to_json()
        True
    """

    run_id: str
    agent_id: str
    status: str
    thread_id: str | None
    resource_id: str | None
    top_level: bool
    # When it paused and when that pause expires (epoch seconds; ``pause_timestamp``, ``expiry_timestamp``).
    paused_at: float | None
    expires_at: float | None
    # The listings of paused runs it is in (none unless it is listed) and its pauses' approver roles.
    index_keys: tuple[IndexKey, ...]
    roles: tuple[str, ...]
    json: str

    @classmethod
    def of(cls, state: RunState) -> RunRecord:
        """The state as it is now: serialized, and filed as a store files it."""
        keys = tuple(index_keys(state))
        return cls(
            run_id=state.run_id,
            agent_id=state.agent_id,
            status=state.status,
            thread_id=state.thread_id,
            resource_id=state.resource_id,
            top_level=state.parent is None,
            paused_at=pause_timestamp(state),
            expires_at=expiry_timestamp(state),
            index_keys=keys,
            roles=tuple(pause_roles(state)) if keys else (),
            json=state.to_json(),
        )

    @property
    def listed(self) -> bool:
        """Whether the run is in the listings of paused runs (``troupe.core.vocabulary.listing.listed``)."""
        return bool(self.index_keys)


def as_record(state: RunState | RunRecord) -> RunRecord:
    """What a store writes for ``state``: the record the caller took, or one taken now."""
    return state if isinstance(state, RunRecord) else RunRecord.of(state)


__all__ = ["RunRecord", "as_record", "expiry_timestamp", "pause_timestamp"]
