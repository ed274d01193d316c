"""``troupe demo`` driven as a person would drive it: the real command, in a pseudo-terminal.

Each test starts the console script in a fresh process whose controlling terminal is a pty, waits for
its prompts, types answers (and Ctrl-C / Ctrl-D, which the terminal turns into SIGINT / end of input),
then checks the exit code, what was printed, and the records table the tools changed in the store file.
"""

from __future__ import annotations

import os
import re
import select
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

# The child becomes a session leader with the pty as its controlling terminal (so ^C is a real SIGINT
# from the terminal), then becomes the command.
_LAUNCH = "import os, sys; os.login_tty(0); os.execvp(sys.argv[1], sys.argv[1:])"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def troupe_command() -> list[str]:
    script = Path(sys.executable).with_name("troupe")
    return [str(script)] if script.exists() else [sys.executable, "-m", "troupe.cli"]


def demo_env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL", "RAY_ADDRESS")
    }
    env["TERM"] = "dumb"
    return env


class Terminal:
    """A process on a pseudo-terminal: read what it prints, type into it."""

    def __init__(self, args: list[str], cwd: Path, timeout: float, env: dict[str, str] | None = None) -> None:
        self.timeout = timeout
        master, slave = os.openpty()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _LAUNCH, *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=cwd,
            env=env or demo_env(),
            close_fds=True,
        )
        os.close(slave)
        self.fd = master
        self.output = ""
        self._seen = 0  # what expect() has already matched past

    def _read(self, wait: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], wait)
        if not ready:
            return False
        try:
            data = os.read(self.fd, 65536)
        except OSError:  # EIO: every writer of the terminal is gone
            return False
        self.output += _ANSI.sub("", data.decode("utf-8", "replace")).replace("\r\n", "\n")
        return bool(data)

    def expect(self, pattern: str, timeout: float | None = None) -> re.Match[str]:
        deadline = time.monotonic() + (timeout or self.timeout)
        regex = re.compile(pattern)
        while True:
            found = regex.search(self.output, self._seen)
            if found:
                self._seen = found.end()
                return found
            left = deadline - time.monotonic()
            if left <= 0 or (
                not self._read(min(left, 0.5)) and self.proc.poll() is not None and not self._read(0.2)
            ):
                raise AssertionError(
                    f"never saw {pattern!r} (exit code {self.proc.poll()}); output so far:\n{self.output}"
                )

    def type(self, line: str) -> None:
        os.write(self.fd, line.encode() + b"\n")

    def press(self, control: bytes) -> None:
        os.write(self.fd, control)

    def wait(self, timeout: float | None = None) -> int:
        deadline = time.monotonic() + (timeout or self.timeout)
        while self.proc.poll() is None and time.monotonic() < deadline:
            self._read(0.2)
        if self.proc.poll() is None:
            self.close()
            raise AssertionError(f"the demo did not exit; output:\n{self.output}")
        while self._read(0.2):
            pass
        return self.proc.returncode

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        os.close(self.fd)


def start_demo(tmp_path: Path, *options: str, timeout: float = 30) -> Terminal:
    return Terminal([*troupe_command(), "demo", "--store", "demo.db", *options], tmp_path, timeout)


def records(tmp_path: Path) -> list[str]:
    with sqlite3.connect(tmp_path / "demo.db") as conn:
        return [row[0] for row in conn.execute("SELECT id FROM demo_records ORDER BY id")]


def bookings(tmp_path: Path) -> list[int]:
    with sqlite3.connect(tmp_path / "demo.db") as conn:
        return [row[0] for row in conn.execute("SELECT people FROM demo_bookings ORDER BY id")]


def final_answer(term: Terminal) -> str:
    return term.expect(r"Final answer: ([^\n]*)\n").group(1)


def approve_and_answer(term: Terminal, people: str) -> None:
    term.expect(r"Approval needed: delete_record \{\"id\": \"abc-123\"\}")
    term.expect(r"Approve\? \[y/n\] ")
    term.type("y")
    term.expect(r"<- delete_record: \{\"deleted\": \"abc-123\"\}")
    term.expect(r"book_table asks: For how many people\?")
    term.expect(r"Answer: ")
    term.type(people)


def test_approve_then_answer_deletes_the_record_and_books_for_four(tmp_path, terminals):
    term = start_demo(tmp_path, "--executor", "local")
    terminals.append(term)

    term.expect(r"model: +scripted FunctionModel")
    term.expect(r"store: +" + re.escape(str(tmp_path / "demo.db")))
    term.expect(r"Records: abc-123, def-456, ghi-789")
    term.expect(r"assistant: First I'll delete record abc-123")
    approve_and_answer(term, "4")
    answer = final_answer(term)
    summary = term.expect(r"Summary: ([^\n]*)\n").group(1)

    assert term.wait() == 0, term.output
    assert "Deleted record abc-123" in answer
    assert "4 people" in answer
    assert "delete_record approved" in summary and "book_table answered '4'" in summary
    assert records(tmp_path) == ["def-456", "ghi-789"]
    assert bookings(tmp_path) == [4]


def test_decline_with_a_reason_keeps_the_record_and_the_model_is_told_why(tmp_path, terminals):
    term = start_demo(tmp_path, "--executor", "local")
    terminals.append(term)

    term.expect(r"Approve\? \[y/n\] ")
    term.type("n")
    term.expect(r"Reason \(optional, Enter to skip\): ")
    term.type("keep it")
    term.expect(r"<- delete_record declined: keep it")
    term.expect(r"Answer: ")
    term.type("3")
    answer = final_answer(term)

    assert term.wait() == 0, term.output
    assert "keep it" in answer
    assert "not deleted" in answer
    assert "3 people" in answer
    assert records(tmp_path) == ["abc-123", "def-456", "ghi-789"]
    assert bookings(tmp_path) == [3]


def test_the_approval_prompt_takes_only_an_explicit_answer_typed_after_it(tmp_path, terminals):
    term = start_demo(tmp_path, "--executor", "local")
    terminals.append(term)
    # Typed before any question was shown (the demo is still starting): it must answer nothing.
    term.type("n")
    term.expect(r"Approve\? \[y/n\] ")
    term.type("maybe")
    term.expect(r"Please answer y \(yes\) or n \(no\)")
    term.expect(r"Approve\? \[y/n\] ")
    assert "Reason" not in term.output and records(tmp_path)[0] == "abc-123"
    term.type("y")
    term.expect(r"<- delete_record: \{\"deleted\": \"abc-123\"\}")
    term.expect(r"Answer: ")
    term.type("2")
    final_answer(term)
    assert term.wait() == 0, term.output
    assert records(tmp_path) == ["def-456", "ghi-789"]


def test_a_non_integer_answer_is_asked_again(tmp_path, terminals):
    term = start_demo(tmp_path, "--executor", "local")
    terminals.append(term)

    approve_and_answer(term, "many")
    # Said in words a person reads: what the answer must be, not the validator's terms.
    term.expect(r"Not accepted: the answer must be a whole number from 1 to 20: How many people the table")
    term.expect(r"Answer: ")
    assert bookings(tmp_path) == [], "an invalid answer must not book anything"
    term.type("2")
    answer = final_answer(term)

    assert term.wait() == 0, term.output
    assert "2 people" in answer
    assert bookings(tmp_path) == [2]
    assert "schema" not in term.output and "resume data" not in term.output, term.output


def test_ctrl_c_and_end_of_input_leave_the_run_paused_and_the_next_demo_resumes_it(tmp_path, terminals):
    first = start_demo(tmp_path, "--executor", "local")
    terminals.append(first)
    first.expect(r"Approve\? \[y/n\] ")
    # Let input() get into its read first: a SIGINT that lands between the prompt being written and the
    # read starting is only seen after the read returns (CPython's input(); no person types that fast).
    time.sleep(0.5)
    first.press(b"\x03")  # Ctrl-C: the terminal sends SIGINT
    paused = first.expect(r"Interrupted\. Run (\S+) stays paused in the store [^\n]*resume it")
    assert first.wait() == 130, first.output
    assert "Traceback" not in first.output
    run_id = paused.group(1)
    assert records(tmp_path) == ["abc-123", "def-456", "ghi-789"]

    second = start_demo(tmp_path, "--executor", "local")
    terminals.append(second)
    second.expect(r"Resuming run " + re.escape(run_id))
    approve_and_answer(second, "")
    second.expect(r"Please type an answer")
    second.expect(r"Answer: ")
    second.press(b"\x04")  # Ctrl-D: end of input
    second.expect(r"No more input\. Run " + re.escape(run_id) + r" stays paused")
    assert second.wait() == 1, second.output
    assert "Traceback" not in second.output
    assert records(tmp_path) == ["def-456", "ghi-789"], "the approved deletion happened before the pause"

    third = start_demo(tmp_path, "--executor", "local")
    terminals.append(third)
    third.expect(r"Resuming run " + re.escape(run_id))
    third.expect(r"book_table asks: For how many people\?")
    third.expect(r"Answer: ")
    third.type("5")
    answer = final_answer(third)

    assert third.wait() == 0, third.output
    assert "Deleted record abc-123" in answer and "5 people" in answer
    assert bookings(tmp_path) == [5]


def test_the_default_ray_executor_runs_the_demo(tmp_path, terminals):
    term = start_demo(tmp_path, timeout=90)  # no --executor: Ray, started locally in the demo process
    terminals.append(term)

    term.expect(r"executor: ray")
    # On a terminal the Ray start spins, then says how long it took (the spinner's \r only there).
    term.expect(r"\rtroupe: starting Ray \(usually 5-15 s\)\.\.\. done \(\d+\.\d s\)")
    approve_and_answer(term, "4")
    answer = final_answer(term)

    assert term.wait() == 0, term.output
    assert "Deleted record abc-123" in answer and "4 people" in answer
    assert records(tmp_path) == ["def-456", "ghi-789"]
    assert bookings(tmp_path) == [4]


def test_a_model_server_that_cannot_be_reached_is_reported_once(tmp_path, terminals):
    env = demo_env()
    env.update(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL="http://127.0.0.1:9/v1")  # nothing listens
    term = Terminal(
        [*troupe_command(), "demo", "--store", "demo.db", "--executor", "local"], tmp_path, 60, env
    )
    terminals.append(term)

    assert term.wait() != 0
    assert term.output.count("cannot reach the model server at http://127.0.0.1:9/v1") == 1, term.output
    assert "sk-test" not in term.output


def test_escape_sequences_the_model_writes_are_shown_not_played(tmp_path, terminals):
    """The model's text, whoever prompted it, reaches the person's terminal only as visible escapes: a
    title change, a screen clear or a right-to-left override in it must not act on the terminal, where
    it could hide or fake what the next prompt asks to approve."""
    from fake_openai import FakeOpenAI, call, reply, serving

    hostile = "Sure.\x1b]0;pwned\x07\x1b[2J\x1b[H\u202egnp.exe\U000e0068\u00ad"
    model = FakeOpenAI(
        [reply(hostile, calls=[call("delete_record", {"id": "abc-123"}, id="c1")]), reply(f"Kept. {hostile}")]
    )
    with serving(model) as base_url:
        env = demo_env()
        env.update(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=base_url)
        term = Terminal(
            [*troupe_command(), "demo", "--store", "demo.db", "--executor", "local"], tmp_path, 60, env
        )
        terminals.append(term)
        term.expect(r"Approve\? \[y/n\] ")
        term.type("n")
        term.expect(r"Reason \(optional, Enter to skip\): ")
        term.type("")
        assert term.wait() == 0, term.output

    shown = r"Sure.\x1b]0;pwned\x07\x1b[2J\x1b[H\u202egnp.exe\U000e0068\xad"
    assert f"assistant: {shown}" in term.output and f"Final answer: Kept. {shown}" in term.output
    assert not {"\x1b", "\u202e", "\U000e0068", "\xad"} & set(term.output)
