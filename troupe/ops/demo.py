"""``troupe demo``: the project's main job end to end, on embedded defaults, driven from a terminal.

An agent, ``records-assistant`` (defined in ``troupe.ops.demo_agent``), has two tools:

- ``delete_record`` is destructive, so it needs approval (``require_approval=True``); the person at the
  terminal approves or declines it (with an optional reason the model is told).
- ``book_table`` pauses itself with ``ctx.agent.suspend({"question": "For how many people?"})``; the person's
  answer is validated against its ``resume_schema`` (``{people: int}``) and the tool runs again with it.

The run's state lives in a SQLite file (``--store``, default ``troupe-demo.db``); the demo's records and
bookings are two tables (``demo_records``, ``demo_bookings``) in the same file. A run left paused (Ctrl-C,
end of input) stays in that file, and the next ``troupe demo --store <same file>`` picks it up where it
stopped. The model is OpenAI's when ``OPENAI_API_KEY`` is set, and otherwise a deterministic
``FunctionModel`` that reads the conversation (so it is restart-safe).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from troupe.core.vocabulary.chunks import Chunk, PauseEvent
from troupe.core.vocabulary.errors import DecisionRejectedError, ResumeDataValidationError, TroupeError
from troupe.core.vocabulary.results import RunResult
from troupe.core.vocabulary.stream import AgentStream
from troupe.core.vocabulary.suspended import PendingToolCall, SuspendedRun
from troupe.ops.demo_agent import AGENT_ID, RecordsDB, build_agent, choose_model, json_or_none
from troupe.ops.terminal import safe
from troupe.storage.sqlite import SqliteStore
from troupe.supervisor.agent import Agent
from troupe.supervisor.runtime import Executor, Runtime

DEFAULT_PROMPT = "Please delete record abc-123, then book a table for dinner tonight."

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130
# What the model writes is shown through ``safe`` (an escape sequence in it would reach the terminal and
# could retitle it or clear what is being approved), keeping only its line breaks.
NEWLINE = "\n"


# ---- the terminal session ---------------------------------------------------------------------------


# A paused call as the terminal shows it: announced by a pause chunk, or listed from the store.
Pause = PauseEvent | PendingToolCall


class EndOfInput(Exception):
    """The person closed the input (end of file)."""


def ask(prompt: str) -> str:
    _discard_type_ahead()
    try:
        return input(prompt)
    except EOFError:
        print()
        raise EndOfInput from None


def _discard_type_ahead() -> None:
    """Drop what was typed before the question was shown: it answers nothing yet."""
    if sys.stdin.isatty():
        import termios

        with contextlib.suppress(termios.error, OSError):
            termios.tcflush(sys.stdin.fileno(), termios.TCIFLUSH)


def confirm(prompt: str) -> bool:
    """A yes/no question that takes only an explicit answer; anything else is asked again."""
    while True:
        answer = ask(prompt).strip().lower()
        if answer in ("y", "yes"):
            return True
        if answer in ("n", "no"):
            return False
        print("Please answer y (yes) or n (no); Ctrl-C leaves the run paused.", flush=True)


@dataclass
class Session:
    agent: Agent
    db: RecordsDB
    store_path: Path
    prompt: str = DEFAULT_PROMPT
    run_id: str | None = None
    # True while the run is durably paused, waiting for the person at the terminal.
    paused: bool = False
    decisions: list[str] = field(default_factory=list)
    # The run's error chunk was shown: its failure is not told a second time.
    failure_shown: bool = False
    _at_line_start: bool = True

    # -- output --

    def _line(self, message: str) -> None:
        if not self._at_line_start:
            print()
            self._at_line_start = True
        print(message, flush=True)

    def show_chunk(self, chunk: Chunk) -> Pause | None:
        p = chunk.payload
        if chunk.type == "text-delta":
            if self._at_line_start:
                print("assistant: ", end="")
            print(safe(p["text"], keep=NEWLINE), end="", flush=True)
            self._at_line_start = False
        elif chunk.type == "tool-call":
            self._line(f"  -> {safe(p['tool_name'])} {json.dumps(p.get('args'))}")
        elif chunk.type == "tool-output-denied":
            self._line(f"  <- {safe(p['tool_name'])} declined: {safe(p['approval'].get('reason'))}")
        elif chunk.type == "tool-result":
            self._line(f"  <- {safe(p['tool_name'])}: {json.dumps(p.get('result'))}")
        elif chunk.type == "tool-error":
            self._line(f"  <- {safe(p['tool_name'])} failed: {json.dumps(p.get('result'))}")
        elif chunk.type == "error":
            error = p.get("error") or {}
            self._line(f"  !! run failed: {safe(error.get('message', error))}")
            self.failure_shown = True
        elif chunk.pause is not None:
            return chunk.pause
        return None

    async def follow(self, stream: AgentStream) -> tuple[RunResult, list[Pause]]:
        """Print a stream live; return its result and the pauses it announced (every open one)."""
        self.run_id = stream.run_id or self.run_id
        pauses: list[Pause] = []
        async for chunk in stream.full_stream:
            pause = self.show_chunk(chunk)
            if pause is not None:
                pauses.append(pause)
        if not self._at_line_start:
            print(flush=True)
            self._at_line_start = True
        result = await stream.result()
        self.paused = result.suspended
        return result, pauses

    # -- deciding --

    async def decide(self, pause: Pause) -> AgentStream:
        assert self.run_id is not None
        if pause.kind == "approval":
            return await self._approve_or_decline(pause)
        return await self._answer(pause)

    async def _approve_or_decline(self, pause: Pause) -> AgentStream:
        assert self.run_id is not None
        print(f"\nApproval needed: {safe(pause.tool_name)} {json.dumps(pause.args)}", flush=True)
        if confirm("Approve? [y/n] "):
            self.decisions.append(f"{pause.tool_name} approved")
            return await self.agent.approve_tool_call(
                run_id=self.run_id, tool_call_id=pause.tool_call_id, fingerprint=pause.fingerprint
            )
        reason = ask("Reason (optional, Enter to skip): ").strip() or None
        self.decisions.append(f"{pause.tool_name} declined" + (f" ({reason})" if reason else ""))
        return await self.agent.decline_tool_call(
            run_id=self.run_id, tool_call_id=pause.tool_call_id, reason=reason, fingerprint=pause.fingerprint
        )

    async def _answer(self, pause: Pause) -> AgentStream:
        assert self.run_id is not None
        payload = pause.suspend_payload
        question = payload.get("question") if isinstance(payload, dict) else None
        print(f"\n{safe(pause.tool_name)} asks: {safe(question or json.dumps(payload))}", flush=True)
        while True:
            answer = ask("Answer: ").strip()
            if not answer:
                print("Please type an answer (Ctrl-C leaves the run paused).", flush=True)
                continue
            data = resume_data_for(answer, pause.resume_schema)
            try:
                stream = await self.agent.resume_stream(
                    data, run_id=self.run_id, tool_call_id=pause.tool_call_id, fingerprint=pause.fingerprint
                )
            except ResumeDataValidationError:
                print(f"Not accepted: {what_fits(pause.resume_schema)}. Please try again.", flush=True)
                continue
            self.decisions.append(f"{pause.tool_name} answered {answer!r}")
            return stream

    # -- the whole conversation --

    async def run(self) -> int:
        found = await self.agent.list_suspended_runs()
        result: RunResult | None = None
        if found.runs:
            pauses: list[Pause] = list(self._resume(found.runs[0], found.total))  # newest first
        else:
            self.db.setup(seed=True)
            print(f"Records: {', '.join(rid for rid, _ in self.db.records())}", flush=True)
            print(f"\nyou: {self.prompt}", flush=True)
            result, pauses = await self.follow(await self.agent.stream(self.prompt))
        while result is None or result.suspended:
            if not pauses:
                print("The run is paused but announced nothing to decide.", flush=True)
                return EXIT_FAILED
            try:
                stream = await self.decide(pauses[0])
            except DecisionRejectedError as exc:
                print(f"Refused: {safe(exc.message)}", flush=True)
                continue
            self.paused = False
            result, pauses = await self.follow(stream)
        self._summary(result)
        return EXIT_OK

    def _resume(self, waiting: SuspendedRun, total: int) -> list[PendingToolCall]:
        """Take up a run an earlier demo left paused in this store."""
        self.run_id, self.paused = waiting.run_id, True
        more = f" ({total - 1} more paused)" if total > 1 else ""
        print(f"Resuming run {waiting.run_id}, left paused in this store{more}.", flush=True)
        self.db.setup(seed=False)
        return waiting.pending

    def _summary(self, result: RunResult) -> None:
        final = result.steps[-1].text if result.steps and result.steps[-1].text else result.text
        left = [rid for rid, _ in self.db.records()]
        print(f"\nFinal answer: {safe(final.strip(), keep=NEWLINE)}")
        print(
            f"Summary: run {self.run_id} finished ({result.finish_reason}); "
            f"{'; '.join(self.decisions) or 'no decisions'}; records left: {', '.join(left) or 'none'}.",
            flush=True,
        )

    def left_paused_message(self, why: str) -> str:
        again = f"{troupe_command()} demo --store {self.store_path}"
        if self.paused and self.run_id:
            return (
                f"{why} Run {self.run_id} stays paused in the store {self.store_path}; "
                f"run `{again}` to resume it."
            )
        return f"{why} Paused runs stay in the store {self.store_path}; run `{again}` to resume them."


def troupe_command() -> str:
    """How to run ``troupe`` again from the shell the demo was started in: ``troupe`` where that is this
    very command on PATH, else the path it was started by (``bash scripts/demo.sh`` runs
    ``.venv/bin/troupe``, which is on no PATH until the virtualenv is activated)."""
    started = os.path.abspath(sys.argv[0])
    found = shutil.which("troupe")
    if found is not None and os.path.realpath(found) == os.path.realpath(started):
        return "troupe"
    if os.path.basename(started) != "troupe":
        return f"{sys.executable} -m troupe.cli"
    relative = os.path.relpath(started)
    return started if relative.startswith("..") else relative


async def run_demo(store_path: Path, executor: Executor, session_out: list[Session]) -> int:
    db = RecordsDB(store_path)
    model, model_label = choose_model()
    agent = build_agent(db, model)
    runtime = Runtime(agents=[agent], storage=SqliteStore(store_path), executor=executor)
    session = Session(runtime.get_agent(AGENT_ID), db, store_path)
    session_out.append(session)
    print("Troupe demo: agent records-assistant (tools: delete_record needs approval, book_table asks you)")
    print(f"  model:    {model_label}")
    print(f"  store:    {store_path} (SQLite)")
    print(
        f"  executor: {executor}" + (" (Ray, started locally)" if executor == "ray" else ""),
        flush=True,
    )
    try:
        return await session.run()
    except EndOfInput:
        print(session.left_paused_message("No more input."), flush=True)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("\n" + session.left_paused_message("Interrupted."), flush=True)
        return EXIT_INTERRUPTED
    except TroupeError as exc:
        if not session.failure_shown:
            print(f"error: {exc.code}: {safe(exc.message)}", flush=True)
        return EXIT_FAILED
    finally:
        await runtime.shutdown()


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def run(store: str | os.PathLike[str], executor: Executor = "ray") -> int:
    """Run the demo in this terminal on the SQLite file ``store``; returns the exit code."""
    sessions: list[Session] = []
    # asyncio.run's own SIGINT handler only cancels the main task, which cannot interrupt a blocking
    # input(); a plain KeyboardInterrupt can, and the session turns it into a clean exit.
    previous = signal.signal(signal.SIGINT, _interrupt)
    try:
        return asyncio.run(run_demo(Path(store).expanduser().resolve(), executor, sessions))
    except KeyboardInterrupt:  # arrived outside the session (e.g. during start-up or shut-down)
        message = sessions[0].left_paused_message("Interrupted.") if sessions else "Interrupted."
        print("\n" + message, flush=True)
        return EXIT_INTERRUPTED
    finally:
        signal.signal(signal.SIGINT, previous)


def resume_data_for(answer: str, schema: dict[str, Any] | None) -> Any:
    """Turn a typed answer into resume data: a one-field schema gets ``{field: answer}`` (numbers and
    booleans converted when they parse; otherwise sent as typed, so the run's own validation decides),
    anything else is read as JSON."""
    properties = (schema or {}).get("properties") or {}
    if len(properties) == 1:
        ((name, spec),) = properties.items()
        return {name: _convert(answer, spec.get("type"))}
    parsed = json_or_none(answer)
    return parsed if parsed is not None else answer


_KINDS = {"integer": "a whole number", "number": "a number", "boolean": "yes or no", "string": "some text"}


def what_fits(schema: dict[str, Any] | None) -> str:
    """What an answer must be, in words a person reads (the schema is for programs): for a one-field
    schema, its kind and bounds and what the field is ("the answer must be a whole number from 1 to 20:
    How many people the table is for"); otherwise its fields, as JSON."""
    properties = (schema or {}).get("properties") or {}
    if len(properties) != 1:
        fields = ", ".join(properties) or "the tool's fields"
        return f"the answer must be JSON with {fields}"
    ((name, spec),) = properties.items()
    kind = _KINDS.get(spec.get("type"), "an answer")
    low, high = spec.get("minimum"), spec.get("maximum")
    if low is not None and high is not None:
        kind += f" from {low} to {high}"
    elif low is not None:
        kind += f" of at least {low}"
    elif high is not None:
        kind += f" of at most {high}"
    return f"the answer must be {kind}: {spec.get('description') or name}"


def _convert(answer: str, kind: Any) -> Any:
    try:
        if kind == "integer":
            return int(answer)
        if kind == "number":
            return float(answer)
    except ValueError:
        return answer
    if kind == "boolean" and answer.lower() in ("y", "yes", "true", "n", "no", "false"):
        return answer.lower() in ("y", "yes", "true")
    return answer


__all__ = ["resume_data_for", "run", "what_fits"]
