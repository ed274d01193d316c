"""``RunResult``: what ``generate()`` returns, folded from the chunks of one operation."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from troupe.core.vocabulary.chunks import PAUSE_TYPES, Chunk
from troupe.core.vocabulary.errors import RunFailedError, TroupeError, error_from_dict


@dataclass
class StepResult:
    """One step of a run: a model turn and the tool calls it made.

    Attributes:
        step: The step's number, from 1.
        text: The text the model wrote in this step.
        tool_calls: The step's tool calls (``tool_call_id``, ``tool_name``, ``args``).
        tool_results: Their results (``tool_call_id``, ``tool_name``, ``result``), as they came.
        finish_reason: Why the step ended (``"tool-calls"``, ``"stop"``, ``"suspended"``, ...).
    """

    step: int
    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    tool_results: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None


@dataclass
class RunResult:
    """What a run came to: what ``generate()`` and ``await stream.result()`` return.

    Attributes:
        run_id: The run's id (what the decision methods take).
        text: The model's text, all steps together.
        finish_reason: ``"stop"`` when the model finished, ``"suspended"`` while a tool call waits for a
            person, ``"max-steps"`` when ``max_steps`` ran out, ``"cancelled"``, ``"max-duration"``,
            ``"error"``.
        suspend_payload: While the run waits: the most recently paused call (``tool_call_id``,
            ``tool_name``, ``args``, and ``suspend_payload`` for a ``suspend()`` pause; also
            ``agent_path``, ``fingerprint`` and ``resume_schema``). None otherwise.
        pending_tool_calls: Every call still waiting, oldest first (the last is ``suspend_payload``).
        tool_calls: Every tool call of the run, in order.
        tool_results: Every tool result (a declined call has none: its reason reached the model, but
            the tool produced nothing, as in Mastra).
        steps: The run's steps (``StepResult``).
        usage: Token counts, as the model reported them.
        error: The error the run ended with (``TroupeError.to_dict()``), or None.
        messages: The finished run's conversation (OpenAI chat format; empty while it is paused).

    Example:
        >>> result = await agent.generate("Delete abc-123")
        >>> if result.suspended:
        ...     print(result.suspend_payload["tool_name"], result.suspend_payload["args"])
        delete_record {'id': 'abc-123'}
    """

    run_id: str
    text: str = ""
    finish_reason: str | None = None
    # A declined call (tool-output-denied) is in neither tool_results nor steps' results, as in Mastra:
    # its reason reached the model, but the tool produced nothing.
    # The most recently paused call while the run waits for a human: tool_call_id, tool_name, args (and
    # suspend_payload for a suspend() pause), plus agent_path, fingerprint and resume_schema.
    suspend_payload: dict[str, Any] | None = None
    # Every call still waiting, oldest first (the last one is ``suspend_payload``).
    pending_tool_calls: list[dict[str, Any]] = field(default_factory=list)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    tool_results: list[dict[str, Any]] = field(default_factory=list)
    steps: list[StepResult] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    error: dict[str, Any] | None = None
    # The finished run's conversation (OpenAI chat format; empty while it is paused).
    messages: list[dict[str, Any]] = field(default_factory=list)

    @property
    def suspended(self) -> bool:
        """Whether the run waits for a person (``finish_reason == "suspended"``)."""
        return self.finish_reason == "suspended"

    def raise_for_error(self) -> RunResult:
        """This result, or the error the run ended with, raised.

        Returns:
            The result itself, when the run did not end with an error.

        Raises:
            TroupeError: The run's error, as its class (``RunFailedError`` for one of no known class).
        """
        if self.error is not None:
            cause = error_from_dict(self.error)
            if type(cause) is TroupeError:
                raise RunFailedError(cause.message, **cause.details)
            raise cause
        return self


class ResultBuilder:
    """Folds chunks into a RunResult; fed incrementally so streams and hosts can share it."""

    def __init__(self, run_id: str = "") -> None:
        self.result = RunResult(run_id=run_id)
        self._text: list[str] = []
        self._step: StepResult | None = None
        self._calls: set[str] = set()

    def feed(self, chunks: Iterable[Chunk]) -> None:
        for chunk in chunks:
            self._feed(chunk)

    def _call(self, payload: dict[str, Any]) -> None:
        self._calls.add(payload.get("tool_call_id", ""))
        self.result.tool_calls.append(payload)
        self._current_step().tool_calls.append(payload)

    def _current_step(self) -> StepResult:
        if self._step is None:
            # A decision stream continues a step that started in an earlier stream.
            self._step = StepResult(step=len(self.result.steps) + 1)
        return self._step

    def _feed(self, chunk: Chunk) -> None:
        result, payload = self.result, chunk.payload
        if not result.run_id:
            result.run_id = chunk.run_id
        kind = chunk.type
        if kind == "step-start":
            self._step = StepResult(step=payload.get("step", len(result.steps) + 1))
        elif kind == "text-delta":
            self._text.append(payload["text"])
            self._current_step().text += payload["text"]
        elif kind == "tool-call":
            self._call(payload)
        elif kind in ("tool-result", "tool-error", "tool-output-denied"):
            self._outcome(kind, payload)
        elif kind in PAUSE_TYPES:
            # A paused stream ends at its pause chunks (no finish chunk, as in Mastra).
            result.pending_tool_calls.append(payload)
            result.suspend_payload = payload
            result.finish_reason = "suspended"
            result.text = "".join(self._text)
        elif kind == "step-finish":
            step = self._current_step()
            step.finish_reason = payload.get("finish_reason")
            result.steps.append(step)
            self._step = None
        elif kind == "error":
            result.error = payload.get("error")
        elif kind == "finish":
            self._finish(payload)

    def _outcome(self, kind: str, payload: dict[str, Any]) -> None:
        # A decision's stream starts at the decided call's outcome: the call is listed as well, as Mastra
        # lists it.
        if payload.get("tool_call_id") not in self._calls:
            self._call({k: payload.get(k) for k in ("tool_call_id", "tool_name", "args")})
        if kind != "tool-output-denied":
            self.result.tool_results.append(payload)
            self._current_step().tool_results.append(payload)

    def _finish(self, payload: dict[str, Any]) -> None:
        result = self.result
        result.finish_reason = payload.get("finish_reason")
        result.usage = payload.get("usage") or {}
        result.messages = payload.get("messages") or []
        result.text = "".join(self._text)
        step = self._step
        if step is not None and (step.tool_calls or step.tool_results or step.text):
            result.steps.append(step)
            self._step = None


def collect(chunks: Iterable[Chunk]) -> RunResult:
    builder = ResultBuilder()
    builder.feed(chunks)
    return builder.result


__all__ = ["ResultBuilder", "RunResult", "StepResult", "collect"]
