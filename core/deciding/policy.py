"""Which tool calls need a human's approval before they run.

Precedence (Mastra's, with two fail-safes):
0. A call an approver policy governs (``troupe.core.deciding.approvers``) always waits for a human,
   whatever the run's options say: the policy says who must decide it, so it is never run undecided.
1. ``require_tool_approval=True`` for the run gates every call.
2. A tool's own ``require_approval`` (True, or a function ``(input, ctx)``) decides for that tool and
   overrides a run-level function.
3. Otherwise a run-level function ``(tool_name, args, request_context, workspace)`` decides.
A rule function that raises means "approval required": an error never lets a call through unreviewed.

Rule functions run on the agent's event loop (sync or async), not in the tool threads: they are quick
predicates asked for every call a model makes, and a thread hop each would cost more than they do. A rule
that has to wait on I/O should be async.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel
from troupe.core.deciding.approvers import ApproverPolicies
from troupe.core.vocabulary.options import RunPolicy
from troupe.core.vocabulary.tools import Tool, ToolContext

log = logging.getLogger(__name__)


async def _ask(fn: Callable[..., Any], *args: Any, what: str) -> bool:
    try:
        verdict = fn(*args)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        return bool(verdict)
    except Exception:
        log.warning("%s raised; treating the call as requiring approval", what, exc_info=True)
        return True


def governed(policies: ApproverPolicies | None, tool_name: str, agent_path: Sequence[str]) -> bool:
    """Whether an approver policy governs a call of ``tool_name`` made at the end of ``agent_path``."""
    return policies is not None and policies.for_call(tool_name, agent_path) is not None


async def requires_approval(
    tool: Tool,
    tool_name: str,
    args: dict[str, Any],
    parsed: BaseModel,
    ctx: ToolContext,
    run_policy: RunPolicy | None,
    under_policy: bool = False,
) -> bool:
    """``under_policy``: an approver policy governs the call (see ``governed``)."""
    if under_policy or run_policy is True or tool.require_approval is True:
        return True
    if callable(tool.require_approval):
        return await _ask(tool.require_approval, parsed, ctx, what=f"require_approval of tool {tool_name!r}")
    if callable(run_policy):
        # Troupe has no workspace object (a Mastra concept); the fourth argument is always None.
        return await _ask(
            run_policy, tool_name, args, ctx.request_context, None, what="require_tool_approval"
        )
    return False


__all__ = ["governed", "requires_approval"]
