"""Cancelling a subagent's run while it waits for a person: routed down from the top, as a decision.

A subagent's pause is shown, and decided, at the top: each run above it waits with the pause lifted
onto its delegation call. Cancelling the subagent's run there directly would leave those lifted pauses
behind, waiting for a run that is gone. So the cancel goes the way a decision goes: the top run claims
it on the delegation call that leads down (a compare-and-set, so it has exactly one winner against an
approval of the same pause, and the claim is the durable hand-off a crash cannot lose), each run on
the way claims it in turn, and the run it is for records the cancel and ends. Its parent then follows
it to that end, and its model is told, in a tool error, that the run was cancelled and why.

A subagent's run that is in flight (its parent follows it live) is cancelled directly: its stream ends
with the cancel, which its parent's model is told the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

from troupe.core.deciding.decisions import find_target
from troupe.core.vocabulary.requests import CancelRequest, DecideRequest, Decline
from troupe.core.vocabulary.state import RunState
from troupe.core.vocabulary.store import Store


@dataclass(frozen=True)
class Route:
    """Where a cancel of a waiting subagent's run is claimed: the top run's delegation call that leads
    down to it, and the pause (by fingerprint) lifted from it there."""

    top: RunState
    tool_call_id: str
    fingerprint: str


async def route_of(store: Store, agent_id: str, request: CancelRequest) -> Route | None:
    """The route for ``request`` if it cancels a subagent's run of ``agent_id`` that waits for a
    person, every run above it waiting too; None if it is to be cancelled directly."""
    stored = await store.load_run(request.run_id)
    if stored is None or stored.state.agent_id != agent_id or stored.state.parent is None:
        return None
    below = stored.state
    if below.status != "suspended":
        return None
    if request.tool_call_id is not None:  # the call the canceller saw must still wait as it saw it
        find_target(below, DecideRequest(below.run_id, Decline(), request.tool_call_id, request.fingerprint))
    path: list[str] = []  # the delegation calls from the top down to the run
    while below.parent is not None:
        path.insert(0, below.parent.tool_call_id)
        above = await store.load_run(below.parent.run_id)
        if above is None or above.state.status != "suspended":
            return None
        below = above.state
    call = below.call(path[0])
    leading = [
        pause
        for pause in (call.pauses if call is not None else [])
        if len(path) == 1 or pause.inner_tool_call_id == path[1]
    ]
    if not leading:
        return None
    return Route(below, path[0], max(leading, key=lambda pause: pause.seq).fingerprint)


__all__ = ["Route", "route_of"]
