"""A remote A2A task as its events tell it, folded into how it stands: still working, ended with an
answer, broken, or asking for input.

The remote agent's events are hostile input: an event about another task, a state that makes no sense
here (``auth-required``, an unknown one) or an answer too large to keep is ``RemoteAgentError`` (a tool
error naming the agent), never a guess. What is kept of a question or an answer is bounded like a
tool's result (``troupe.core.vocabulary.storable``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.json_format import MessageToDict
from troupe.actors.a2a.errors import RemoteAgentError
from troupe.actors.a2a.pending import whole_numbers
from troupe.core.vocabulary.storable import MAX_RESULT_CHARS, value_problem

# How many artifacts and parts of a task are read (a remote agent could send any number).
MAX_ARTIFACTS = 100
MAX_PARTS = 100
# How many of a task's latest history messages are looked at (for an answer whose reply was lost).
MAX_HISTORY = 1000


@dataclass(frozen=True)
class Question:
    """What an ``input-required`` status asks: its text and data parts, and an id for this question."""

    id: str
    text: str
    data: tuple[Any, ...]


@dataclass(frozen=True)
class Ended:
    """The task completed; ``text`` is its answer (its artifacts, else its status message)."""

    text: str


@dataclass(frozen=True)
class Broke:
    """The task failed, was rejected or cancelled, or stands where nothing here can follow it
    (``error``: the error that says so, when there is one)."""

    why: str
    error: RemoteAgentError | None = None


Outcome = Ended | Broke | Question

_WORKING = frozenset({"TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"})
_BROKE = frozenset({"TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"})


@dataclass
class RemoteTask:
    """The fold of one task's events (``feed``); ``outcome`` once it has ``settled``."""

    agent: str  # how errors name the remote agent
    task_id: str | None = None
    context_id: str | None = None
    state: str = "TASK_STATE_UNSPECIFIED"
    status: dict[str, Any] = field(default_factory=dict)
    artifacts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # A plain message answered the request instead of a task (a stateless agent): it is the answer.
    reply: dict[str, Any] | None = None
    # Whether any event has said the task's state yet (an artifact may come before the first status).
    told: bool = False
    # The ids of the messages the task's history holds (as far as the agent keeps one).
    history: set[str] = field(default_factory=set)

    def feed(self, event: Any) -> None:
        """Take one ``StreamResponse`` of the remote agent into the fold."""
        kind = event.WhichOneof("payload")
        if kind is None:
            raise self.error("sent an empty event")
        data = MessageToDict(getattr(event, kind))
        if kind == "task":
            self.feed_task(data)
        elif kind == "status_update":
            self._own(data.get("taskId"))
            self._status(data.get("status") or {})
        elif kind == "artifact_update":
            self._own(data.get("taskId"))
            self._artifact(data.get("artifact") or {}, bool(data.get("append")))
        else:  # a plain message: the answer of an agent that keeps no task
            self.reply = data

    def feed_task(self, data: dict[str, Any]) -> None:
        """Take a whole task (its JSON form) into the fold, as ``GetTask`` answers it."""
        self._own(data.get("id"))
        self.context_id = data.get("contextId") or self.context_id
        self._status(data.get("status") or {})
        said = data.get("history") or []
        self.history |= {str(m.get("messageId")) for m in said[-MAX_HISTORY:] if isinstance(m, dict)}
        artifacts = data.get("artifacts") or []
        if artifacts:
            self.artifacts = {}
            for artifact in artifacts[:MAX_ARTIFACTS]:
                self._artifact(artifact, append=False)

    def _own(self, task_id: Any) -> None:
        if not isinstance(task_id, str) or not task_id:
            raise self.error("sent an event that names no task")
        if self.task_id is None:
            self.task_id = task_id
        elif task_id != self.task_id:
            raise self.error(f"sent an event of task {task_id!r} while following task {self.task_id!r}")

    def _status(self, status: dict[str, Any]) -> None:
        self.state = str(status.get("state") or "TASK_STATE_UNSPECIFIED")
        self.status = status
        self.told = True

    def _artifact(self, artifact: dict[str, Any], append: bool) -> None:
        key = str(artifact.get("artifactId") or len(self.artifacts))
        parts = list(artifact.get("parts") or [])[:MAX_PARTS]
        if append and key in self.artifacts:
            self.artifacts[key] = (self.artifacts[key] + parts)[:MAX_PARTS]
        elif len(self.artifacts) < MAX_ARTIFACTS or key in self.artifacts:
            self.artifacts[key] = parts

    @property
    def settled(self) -> bool:
        """Whether the task stands still: ended, broken or asking (else it is still working)."""
        return self.reply is not None or (self.told and self.state not in _WORKING)

    def outcome(self) -> Outcome:
        """How the task stands once settled; ``RemoteAgentError`` for a state that makes no sense here."""
        if self.reply is not None:
            return Ended(self._kept(_text_of(self.reply.get("parts") or [])))
        state = self.state
        message = self.status.get("message") or {}
        parts = list(message.get("parts") or [])[:MAX_PARTS]
        if state == "TASK_STATE_COMPLETED":
            answer = [p for parts_ in self.artifacts.values() for p in parts_] or parts
            return Ended(self._kept(_text_of(answer)))
        if state == "TASK_STATE_INPUT_REQUIRED":
            return self._question(message, parts)
        if state in _BROKE:
            said = _text_of(parts)
            return Broke(f"its task ended {_state_name(state)}" + (f": {said}" if said else ""))
        if state == "TASK_STATE_AUTH_REQUIRED":
            raise self.error("asks for authentication (auth-required), which Troupe cannot give it")
        raise self.error(f"answered with a task in a state that makes no sense here ({state!r})")

    def _question(self, message: dict[str, Any], parts: list[dict[str, Any]]) -> Question:
        text = "\n".join(p["text"] for p in parts if isinstance(p.get("text"), str))
        data = tuple(whole_numbers(p["data"]) for p in parts if "data" in p)
        problem = value_problem([text, list(data)], MAX_RESULT_CHARS)
        if problem is not None:
            raise self.error(f"asked a question that cannot be kept: {problem}")
        said = message.get("messageId") or json.dumps([self.task_id, text, list(data)], sort_keys=True)
        question_id = "a2a-" + hashlib.sha256(str(said).encode()).hexdigest()[:16]
        return Question(question_id, text, data)

    def _kept(self, text: str) -> str:
        problem = value_problem(text, MAX_RESULT_CHARS)
        if problem is not None:
            raise self.error(f"answered with what cannot be kept: {problem}")
        return text

    def error(self, what: str) -> RemoteAgentError:
        task = f" (task {self.task_id})" if self.task_id else ""
        return RemoteAgentError(f"{self.agent}{task} {what}", task_id=self.task_id)


def _text_of(parts: list[Any]) -> str:
    """The parts as text: text parts as they are, data parts as JSON, files by name."""
    out = []
    for part in parts:
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("text"), str):
            out.append(part["text"])
        elif "data" in part:
            out.append(json.dumps(whole_numbers(part["data"]), ensure_ascii=False))
        elif part.get("url") or part.get("raw"):
            out.append(f"[file {part.get('filename') or part.get('url') or ''}]".strip())
    return "\n".join(out)


def _state_name(state: str) -> str:
    return state.removeprefix("TASK_STATE_").lower().replace("_", "-")


__all__ = ["MAX_ARTIFACTS", "Broke", "Ended", "Outcome", "Question", "RemoteTask"]
