"""A2A for the tests: agents written with the a2a-sdk's own server side (not Troupe), served for real,
and what the Python SDK's client needs to talk to a server.

``AskingAgent`` asks which city (``input-required``), then answers with the weather there, recording
every answer it gets in a ``CallLog`` (a file: visible across processes); ``WorkingAgent`` works until
its task is cancelled (``StubbornAgent`` refuses to be). Each records a cancel of its task.
``SdkServer`` serves an executor with the SDK's ``DefaultRequestHandler`` (or ``FailsAfterActing``, a
server that fails after acting on an answer) and an in-memory task store, on uvicorn in a thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import uvicorn
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers.proto_helpers import (
    get_data_parts,
    get_text_parts,
    new_data_part,
    new_task_from_user_message,
    new_text_part,
)
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    TaskState,
)
from a2a.utils.errors import InternalError, TaskNotCancelableError
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from troupe.testing import CallLog


class AskingAgent(AgentExecutor):
    """Asks which city, then answers "Sunny in <city>". For the tests of a remote agent that misbehaves:
    ``first_state`` asks in another state, ``question`` replaces the question's parts, ``answer_chars``
    pads the answer to that many characters, ``answer_delay_s`` takes that long to answer."""

    def __init__(
        self,
        log: CallLog,
        first_state: Any = TaskState.TASK_STATE_INPUT_REQUIRED,
        question: list[Part] | None = None,
        answer_chars: int = 0,
        answer_delay_s: float = 0.0,
    ) -> None:
        self.log = log
        self.answer_delay_s = answer_delay_s
        self.first_state = first_state
        self.question = question
        self.answer_chars = answer_chars

    async def execute(self, context: RequestContext, event_queue: Any) -> None:
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        message = context.message
        assert message is not None
        if context.current_task is None:
            task = new_task_from_user_message(message)
            task.id, task.context_id = updater.task_id, updater.context_id
            await event_queue.enqueue_event(task)
            self.log.record("asked", prompt="\n".join(get_text_parts(message.parts)), task_id=context.task_id)
            question = updater.new_agent_message(self.question or [new_text_part("Which city?")])
            await updater.update_status(self.first_state, message=question)
            return
        said = get_text_parts(message.parts) + [str(d) for d in get_data_parts(message.parts)]
        answer = " ".join(said)
        self.log.record("answered", answer=answer, task_id=context.task_id)
        await asyncio.sleep(self.answer_delay_s)
        text = f"Sunny in {answer}".ljust(self.answer_chars, ".")
        await updater.add_artifact([new_text_part(text)], name="forecast")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: Any) -> None:
        self.log.record("cancelled", task_id=context.task_id)
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.cancel()


class WorkingAgent(AgentExecutor):
    """Says it is working on the task, then works until the task is cancelled (recorded as
    "working", then "cancelled", in ``log``)."""

    def __init__(self, log: CallLog) -> None:
        self.log = log

    async def execute(self, context: RequestContext, event_queue: Any) -> None:
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        message = context.message
        assert message is not None
        task = new_task_from_user_message(message)
        task.id, task.context_id = updater.task_id, updater.context_id
        await event_queue.enqueue_event(task)
        await updater.start_work(updater.new_agent_message([new_text_part("Working on it")]))
        self.log.record("working", task_id=context.task_id)
        await asyncio.Event().wait()  # until the task is cancelled (its producer task is)

    async def cancel(self, context: RequestContext, event_queue: Any) -> None:
        self.log.record("cancelled", task_id=context.task_id)
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.cancel()


class StubbornAgent(WorkingAgent):
    """Works until its task is cancelled, but refuses every cancel (records "refused"): a remote agent
    that cannot stop what it is doing."""

    async def cancel(self, context: RequestContext, event_queue: Any) -> None:
        self.log.record("refused", task_id=context.task_id)
        raise TaskNotCancelableError(message="this agent cannot stop its work")


class FirstAnswerFails(DefaultRequestHandler):
    """The a2a-sdk's request handler for a server that mishandles the first answer on a task: it records
    ``mark`` in ``log``, waits ``hold_s``, then fails with an internal error, leaving the task as it was
    (still asking the same question). The answers after that reach its agent."""

    mark = "mishandled"
    hold_s = 0.0
    why = "the answer was mishandled"

    def __init__(self, log: CallLog, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.log = log

    async def on_message_send_stream(self, params: Any, context: Any) -> Any:
        if params.message.task_id and not self.log.count(self.mark):  # the first answer on its task
            self.log.record(self.mark, task_id=params.message.task_id)
            await asyncio.sleep(self.hold_s)
            raise InternalError(message=self.why)
        async for event in super().on_message_send_stream(params, context):
            yield event


class FailsAfterActing(FirstAnswerFails):
    """Acts on the first answer before its agent runs (records "acted", as if it booked what was
    asked), then fails at once (its own store broke, say)."""

    mark = "acted"
    why = "the booking went through, then our ledger failed"


class DropsFirstAnswer(FirstAnswerFails):
    """Holds the first answer for 3 s without taking it (records "dropped"), then fails: a client that
    gives up sooner cannot tell whether it arrived."""

    mark = "dropped"
    hold_s = 3.0
    why = "the answer was dropped"


def sdk_card(url: str, name: str = "Weather desk", streaming: bool = True) -> AgentCard:
    return AgentCard(
        name=name,
        description="Tells the weather of a city it asks for",
        supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")],
        version="1.0.0",
        capabilities=AgentCapabilities(streaming=streaming),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="weather", name="weather", description="The weather", tags=["weather"])],
    )


class SdkServer:
    """An A2A agent of the SDK's own on uvicorn (127.0.0.1, a free port), in a thread of its own."""

    def __init__(
        self,
        executor: AgentExecutor,
        streaming: bool = True,
        handler: Callable[..., Any] = DefaultRequestHandler,
    ) -> None:
        self.executor = executor
        self.streaming = streaming
        self.handler = handler  # the request handler's class (or a function that makes one)
        self.port = 0
        self.server: uvicorn.Server | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> SdkServer:
        self._thread.start()
        if not self._ready.wait(30):
            raise TimeoutError("the A2A test agent did not start")
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.should_exit = True
        self._thread.join(timeout=30)

    async def _main(self) -> None:
        config = uvicorn.Config(Starlette(), host="127.0.0.1", port=0, log_level="warning")
        self.server = uvicorn.Server(config)
        # The card names the server's own URL, known once it listens: the app is built after that.
        app = Starlette()
        config.app = app
        serving = asyncio.get_running_loop().create_task(self.server.serve())
        while not self.server.started:
            await asyncio.sleep(0.01)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]
        app.router.routes.extend(self.routes())
        self._ready.set()
        await serving

    def routes(self) -> list[Any]:
        """The agent's card and its JSON-RPC endpoint (``/rpc``), for the server's own URL."""
        card = sdk_card(f"{self.url}/rpc", streaming=self.streaming)
        handler = self.handler(self.executor, InMemoryTaskStore(), card)
        return [*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/rpc")]


class BrokenEndpoint(SdkServer):
    """An A2A endpoint whose ``/rpc`` answers every request HTTP 500 (a server, or a proxy in front of
    it, that breaks); its card is the test's own."""

    def __init__(self, log: CallLog) -> None:
        super().__init__(WorkingAgent(log))  # never asked: nothing is served but the 500

    def routes(self) -> list[Any]:
        async def broken(request: Any) -> PlainTextResponse:
            return PlainTextResponse("upstream broke", status_code=500)

        return [Route("/rpc", broken, methods=["POST"])]


# ---- the Python SDK's client ----------------------------------------------------------------------------


async def sdk_client(base_url: str, key: str | None) -> tuple[Any, httpx.AsyncClient]:
    """The a2a-sdk's client for the agent at ``base_url`` (its card resolved with ``key``)."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    http = httpx.AsyncClient(headers=headers, timeout=60)
    card = await A2ACardResolver(http, base_url).get_agent_card()
    return ClientFactory(ClientConfig(httpx_client=http)).create(card), http


def text_message(
    text: str, *, task_id: str = "", metadata: dict[str, Any] | None = None
) -> SendMessageRequest:
    message = Message(message_id=f"m-{id(text)}-{text[:8]}", role=Role.ROLE_USER, task_id=task_id)
    message.parts.append(new_text_part(text))
    return SendMessageRequest(message=message, metadata=metadata or {})


def data_message(data: Any, task_id: str) -> SendMessageRequest:
    message = Message(message_id=f"m-{task_id}-{id(data)}", role=Role.ROLE_USER, task_id=task_id)
    message.parts.append(new_data_part(data))
    return SendMessageRequest(message=message)


async def events_of(stream: AsyncIterator[StreamResponse]) -> list[dict[str, Any]]:
    """Every event of a send, as JSON (``{"task": ...}``, ``{"statusUpdate": ...}``, ...)."""
    return [MessageToDict(event) for event in [e async for e in stream]]


def last_task(events: list[dict[str, Any]]) -> dict[str, Any]:
    return next(e["task"] for e in reversed(events) if "task" in e)


def pending_of(task: dict[str, Any]) -> dict[str, Any]:
    """The data part of an input-required task's status message (the pending calls)."""
    parts = task["status"]["message"]["parts"]
    return next(p["data"] for p in parts if "data" in p)


def status_text(task: dict[str, Any]) -> str:
    parts = (task["status"].get("message") or {}).get("parts") or []
    return "\n".join(p["text"] for p in parts if "text" in p)


def artifact_text(task: dict[str, Any]) -> str:
    return "\n".join(p.get("text", "") for a in task.get("artifacts") or [] for p in a["parts"])


__all__ = [
    "AskingAgent",
    "DropsFirstAnswer",
    "FailsAfterActing",
    "Part",
    "SdkServer",
    "StubbornAgent",
    "WorkingAgent",
    "artifact_text",
    "data_message",
    "events_of",
    "last_task",
    "pending_of",
    "sdk_card",
    "sdk_client",
    "status_text",
    "text_message",
]
