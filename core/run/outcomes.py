"""A call's outcome, recorded in its state and reported by a chunk: a result or an error
(``record_result``), or a decline (``decline_chunk``): every way a call ends makes its chunk here (a
tool that ran, a late outcome taken from the audit log, a call cut short by a crash, a declined call).
"""

from __future__ import annotations

from typing import Any

from troupe.core.vocabulary.chunks import Chunk
from troupe.core.vocabulary.state import CallStatus, ToolCallState


def record_result(
    run_id: str, call: ToolCallState, output: Any, is_error: bool = False, **extra: Any
) -> Chunk:
    """Record the call's output (mutates ``call``); the chunk that reports it (``extra`` in its payload)."""
    call.status, call.output, call.is_error = CallStatus.DONE, output, is_error
    payload = {
        "tool_call_id": call.tool_call_id,
        "tool_name": call.tool_name,
        "args": call.effective_args,
        "result": output,
        **extra,
    }
    return Chunk("tool-error" if is_error else "tool-result", run_id, payload)


def decline_chunk(run_id: str, call: ToolCallState) -> Chunk:
    """Mastra's ``tool-output-denied``: the tool never ran; the model hears ``approval.reason``."""
    return Chunk(
        "tool-output-denied",
        run_id,
        {
            "tool_call_id": call.tool_call_id,
            "tool_name": call.tool_name,
            "args": call.effective_args,
            "approval": {"id": call.tool_call_id, "approved": False, "reason": call.output},
        },
    )


__all__ = ["decline_chunk", "record_result"]
