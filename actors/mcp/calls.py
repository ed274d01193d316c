"""One tool call in flight on an MCP session, and the elicitations it makes while in flight.

A call's task runs ``tools/call``; whatever happens to it next (the server asks for input, or the call
ends) arrives on one queue that the agent's tool reads with ``next``. An elicitation holds the server's
request open on a future until a person's answer (``answer``) or the session's end settles it: the call
stays in flight on the live session all that time, which is why it can only be answered on the host
that holds the session.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

# (run id, tool call id): a call of a run, as a pause names it.
CallKey = tuple[str, str]


@dataclass
class Ask:
    """A server's elicitation during a call: ``message`` and ``schema`` (the requested object schema)
    as the server sent them; ``answer`` resolves to the MCP ``ElicitResult`` fields."""

    message: str
    schema: dict[str, Any]
    answer: asyncio.Future[dict[str, Any]]


@dataclass
class Ended:
    """The call's end: the ``CallToolResult`` as JSON, or the error that ended it."""

    result: dict[str, Any] | None = None
    error: BaseException | None = None


@dataclass
class InFlightCall:
    key: CallKey
    events: asyncio.Queue[Ask | Ended] = field(default_factory=asyncio.Queue)
    asking: Ask | None = None
    task: asyncio.Task[None] | None = None

    async def next(self, timeout_s: float) -> Ask | Ended:
        """The call's next event; a server silent for ``timeout_s`` (no human is waited for here) ends
        the call."""
        try:
            async with asyncio.timeout(timeout_s):
                return await self.events.get()
        except TimeoutError:
            self.cancel()
            return Ended(error=TimeoutError(f"no answer from the MCP server within {timeout_s:g} s"))

    def ask(self, message: str, schema: dict[str, Any]) -> Ask:
        """Record the server's elicitation; the session's handler waits on ``Ask.answer``."""
        self.asking = Ask(message, schema, asyncio.get_running_loop().create_future())
        self.events.put_nowait(self.asking)
        return self.asking

    def answer(self, result: dict[str, Any]) -> None:
        """Hand a person's answer to the elicitation this call waits on (if it still does)."""
        asking, self.asking = self.asking, None
        if asking is not None and not asking.answer.done():
            asking.answer.set_result(result)

    def end(self, ended: Ended) -> None:
        self.events.put_nowait(ended)

    def cancel(self) -> None:
        if self.asking is not None and not self.asking.answer.done():
            self.asking.answer.cancel()
        if self.task is not None:
            self.task.cancel()


def elicit_answer(resume_data: Any, decline_reason: str | None, expired: bool) -> dict[str, Any]:
    """A person's decision on an elicitation's pause as MCP's ``ElicitResult``: an answer accepts with
    it, a decline declines, and a pause that ran out of time is a cancel (nobody chose)."""
    if decline_reason is None:
        return {"action": "accept", "content": resume_data}
    return {"action": "cancel" if expired else "decline"}


__all__ = ["Ask", "CallKey", "Ended", "InFlightCall", "elicit_answer"]
