"""Approver policies: who may decide a paused call, and how many must agree.

A policy names the agent and/or tool it governs (the most specific matching policy applies: agent and
tool, then tool, then agent), the roles allowed to decide, whether the principal that started the run
may decide its own calls (separation of duties), and a quorum: N distinct approvers before the tool
runs, while one decline declines. It governs approval pauses of top-level runs (a subagent's pause is
decided at the top, so it is checked there, against the leaf tool and the agents on its path); answers
to a tool's own ``suspend()`` and expiries are not approvals and are not governed.

Every check happens before anything is written, so a refused decision changes nothing. Who decides is
the request's principal (``troupe.core.vocabulary.identity``): over HTTP the key's, token's or host
app's; through the CLI ``--as``; through the Python API the caller says (the process is trusted as it
is). Every approval of a quorum is for the same args: approvals with different edits are counted apart,
and the tool runs with the args that reached the quorum first.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from troupe.core.vocabulary.errors import ApprovalPolicyError, CancelForbiddenError
from troupe.core.vocabulary.identity import Approval, Principal
from troupe.core.vocabulary.requests import Approve, DecideRequest, DecisionInput
from troupe.core.vocabulary.state import Pause, RunState


@dataclass(frozen=True)
class ApproverPolicy:
    """Who may decide the calls of an agent or a tool, and how many must agree.

    Give a runtime its policies with ``Runtime(approver_policies=[...])``. The most specific policy
    that governs a pause applies (agent and tool, then tool, then agent). A call a policy governs always
    pauses, whatever a run's options say, and needs a decider who says who they are.

    Args:
        agent: The agent it governs: any agent on the pause's path (None: every agent).
        tool: The tool it governs, by the leaf tool's name (None: every tool).
        roles: The roles allowed to decide (None: any principal).
        separation_of_duties: The principal who started the run may not decide its calls.
        quorum: How many distinct approvers must approve (the same args) before the tool runs; one
            decline declines.

    Raises:
        ValueError: A quorum that is not an integer of at least 1.

    Example:
        >>> payments = ApproverPolicy(tool="pay_invoice", roles=frozenset({"finance"}),
        ...                           separation_of_duties=True, quorum=2)
        >>> runtime = Runtime([agent], approver_policies=[payments])
    """

    agent: str | None = None  # any agent on the pause's path; None: every agent
    tool: str | None = None  # the leaf tool's name; None: every tool
    roles: frozenset[str] | None = None  # roles allowed to decide; None: any principal
    separation_of_duties: bool = False  # the run's starter may not decide its calls
    quorum: int = 1  # distinct approvals needed before the tool runs

    def __post_init__(self) -> None:
        if not isinstance(self.quorum, int) or isinstance(self.quorum, bool) or self.quorum < 1:
            raise ValueError(f"quorum must be an integer >= 1, got {self.quorum!r}")
        if self.roles is not None and not isinstance(self.roles, frozenset):
            object.__setattr__(self, "roles", frozenset(self.roles))

    def governs(self, tool_name: str, agent_path: Sequence[str]) -> bool:
        """Whether this policy governs a call of the tool, paused through these agents.

        Args:
            tool_name: The leaf tool's name.
            agent_path: The agents from the top to the one whose tool it is.
        """
        return (self.agent is None or self.agent in agent_path) and (
            self.tool is None or self.tool == tool_name
        )

    @property
    def specificity(self) -> int:
        """How specific the policy is (agent and tool 3, tool 2, agent 1, neither 0): the highest wins."""
        return (2 if self.tool is not None else 0) + (1 if self.agent is not None else 0)


@dataclass(frozen=True)
class ApproverPolicies:
    policies: tuple[ApproverPolicy, ...] = ()

    @classmethod
    def of(cls, policies: ApproverPolicies | Iterable[ApproverPolicy] | None) -> ApproverPolicies | None:
        if policies is None or isinstance(policies, ApproverPolicies):
            return policies
        return cls(tuple(policies))

    def for_pause(self, pause: Pause) -> ApproverPolicy | None:
        """The policy for this pause: the most specific that governs it (approval pauses only)."""
        return self.for_call(pause.tool_name, pause.agent_path) if pause.kind == "approval" else None

    def for_call(self, tool_name: str, agent_path: Sequence[str]) -> ApproverPolicy | None:
        found = [p for p in self.policies if p.governs(tool_name, agent_path)]
        return max(found, key=lambda p: p.specificity) if found else None


def check_decider(
    policy: ApproverPolicy, state: RunState, pause: Pause, decision: DecisionInput, request: DecideRequest
) -> None:
    """Raise ``ApprovalPolicyError`` (403) saying why, unless the request's principal may decide.
    ``decision`` is the request's decision as it applies (resume data for an approval pause already
    turned into an approval or a decline: see ``troupe.core.deciding.decisions.as_decision``). People are
    compared by subject id (issuer and subject), never by name."""
    who = request.decider
    call = f"tool call {pause.tool_name!r} of run {state.run_id}"
    if who is None or who.anonymous:
        raise _refused(
            f"{call} is governed by an approver policy: it is decided only by someone who says who they "
            "are (sign in, or send your API key or token; a decision link alone does not say who you are)",
            state,
        )
    name = who.display
    if policy.roles is not None and not policy.roles.intersection(who.roles):
        raise _refused(
            f"{name!r} may not decide {call}: it needs one of the roles {sorted(policy.roles)}", state, name
        )
    if policy.separation_of_duties and state.starter_id == who.id:
        raise _refused(
            f"{name!r} started run {state.run_id} and may not decide its calls (separation of duties)",
            state,
            name,
        )
    if isinstance(decision, Approve) and any(a.id == who.id for a in pause.approvals):
        raise _refused(
            f"{name!r} has already approved {call}; {policy.quorum} distinct approvers are needed",
            state,
            name,
        )


def check_canceller(policies: ApproverPolicies | None, state: RunState, who: Principal | None) -> None:
    """Raise ``CancelForbiddenError`` (403) unless ``who`` may cancel the run: the principal that
    started it, an admin, or someone an approver policy lets decide its calls (one that governs one of
    its open pauses, or every tool of an agent on its path). ``who`` None is the process itself (the
    Python API without a name), which may. People are compared by subject id."""
    if who is None or who.admin or (state.starter_id is not None and who.id == state.starter_id):
        return
    path = [*(state.parent.agent_path if state.parent is not None else ()), state.agent_id]
    governing = [policies.for_pause(pause) for _, pause in state.open_pauses()] if policies else []
    if policies is not None:
        governing += [p for p in policies.policies if p.tool is None and p.governs("", path)]
    if any(p is not None and _may_decide(p, who) for p in governing):
        return
    raise CancelForbiddenError(
        f"{who.display!r} may not cancel run {state.run_id}: only whoever started it, an admin, or an "
        "approver its approver policies name may",
        run_id=state.run_id,
        principal=who.display,
    )


def _may_decide(policy: ApproverPolicy, who: Principal) -> bool:
    if who.anonymous:
        return False
    return policy.roles is None or bool(policy.roles.intersection(who.roles))


def agreeing(pause: Pause, args: dict[str, Any]) -> list[Approval]:
    """The approvals so far that are for exactly ``args``: only they count together towards a quorum
    (an approval with other edits starts a count of its own)."""
    return [a for a in pause.approvals if approved_args(pause, a.edited_args) == args]


def approved_args(pause: Pause, edited_args: dict[str, Any] | None) -> dict[str, Any]:
    """What an approval is for: the paused call's args with its edits over them."""
    return {**pause.args, **(edited_args or {})}


def needs_more(policy: ApproverPolicy | None, pause: Pause, decision: DecisionInput) -> bool:
    """Whether this approval only counts towards the quorum (the call keeps waiting)."""
    if policy is None or not isinstance(decision, Approve):
        return False
    return len(agreeing(pause, approved_args(pause, decision.edited_args))) + 1 < policy.quorum


def _refused(message: str, state: RunState, who: str | None = None) -> ApprovalPolicyError:
    return ApprovalPolicyError(message, run_id=state.run_id, principal=who)


__all__ = [
    "ApproverPolicies",
    "ApproverPolicy",
    "agreeing",
    "approved_args",
    "check_canceller",
    "check_decider",
    "needs_more",
]
