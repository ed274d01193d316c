"""How a runtime's agents drive their runs: the same for every agent host of a runtime, and sent with
each to its Ray actor (so it is a plain, picklable value)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from troupe.core.deciding.approvers import ApproverPolicies
from troupe.core.notifying.outbox import Notifications
from troupe.core.vocabulary.seconds import check_seconds
from troupe.core.vocabulary.state import Clock, utcnow
from troupe.core.vocabulary.tool_threads import DEFAULT_TOOL_THREADS, ToolThreads

# When a run is written (LangGraph's names). "exit": only when the run pauses, before any tool runs (its
# calls are marked running first, so a crash never runs one twice silently) and when it ends; a step's
# results ride with the next of those writes, and a crash in between reports the step's calls as
# interrupted (a gated call is surfaced for a decision again); a run that crashes before its first write
# is not recovered. "sync" also writes a run when it starts and after every step's tools have run, before
# the next model turn, so a crash during any model turn resumes from where it stood.
Durability = Literal["sync", "exit"]
DURABILITY_MODES: tuple[Durability, ...] = ("sync", "exit")
# How long a call of a tool without timeout_s stays in doubt after a takeover (as long as an MCP call may
# take by default), and the margin added to any call's deadline (clocks and the last write can be late).
DEFAULT_IN_DOUBT_S = 300.0
DEFAULT_IN_DOUBT_MARGIN_S = 5.0


def check_durability(durability: str) -> Durability:
    if durability not in DURABILITY_MODES:
        raise ValueError(f"durability must be one of {', '.join(DURABILITY_MODES)}; got {durability!r}")
    return durability


@dataclass(frozen=True)
class RunSettings:
    """``notifications``: where pauses and decisions are announced; ``policies``: who may decide which
    paused calls; ``clock``: what pause deadlines are measured against (tests inject one; it must be
    picklable); ``tool_threads``: how many sync tool calls a host runs at once; ``durability``: when runs
    are written (above)."""

    notifications: Notifications | None = None
    policies: ApproverPolicies | None = None
    clock: Clock = utcnow
    tool_threads: int = DEFAULT_TOOL_THREADS
    durability: Durability = "sync"
    # A call taken over from a host that may still be running it is in doubt until its deadline: the
    # tool's timeout_s (this, for a tool without one) from when it started, plus the margin
    # (troupe.core.run.in_doubt).
    in_doubt_default_s: float = DEFAULT_IN_DOUBT_S
    in_doubt_margin_s: float = DEFAULT_IN_DOUBT_MARGIN_S

    def __post_init__(self) -> None:
        check_durability(self.durability)
        for name in ("in_doubt_default_s", "in_doubt_margin_s"):
            check_seconds(getattr(self, name), name, zero=True)
        ToolThreads(self.tool_threads)  # a bad size is the caller's error now, not an actor's at first use


__all__ = [
    "DEFAULT_IN_DOUBT_MARGIN_S",
    "DEFAULT_IN_DOUBT_S",
    "DURABILITY_MODES",
    "Durability",
    "RunSettings",
    "check_durability",
]
