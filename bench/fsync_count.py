"""Counting a running process's fsync and fdatasync calls, for W3-fsync (no Troupe or Ray imports: the
peers' processes use it too). Two tools, each attached to every thread of a process (and following the
threads it starts), counting only between attaching and leaving:

- ``strace -f -c -e trace=fsync,fdatasync -p PID``, as the issue asked: when it gets SIGINT it detaches
  and writes its summary. Attached with ``-p`` it cannot install a seccomp filter (strace does that only
  for processes it starts), so the traced process stops at every system call it makes, counted or not,
  and runs several times slower. A store that batches the fsyncs of concurrent writers (Redis's
  ``appendfsync always`` fsyncs once per event-loop turn for every client served in it) then batches
  differently, so its count moves with the slowdown: the harness counts on a separate pass.
- ``perf stat -e syscalls:sys_enter_fsync,syscalls:sys_enter_fdatasync -p PID``: kernel counters on the
  syscall tracepoints, which do not stop the process; started with its events disabled and enabled
  through its control pipe (``--control``), so counting starts when perf acknowledges. It needs tracefs
  and permission to use tracepoints (``perf_usable`` says why not).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

SYSCALLS = ("fsync", "fdatasync")
# The tools attach within milliseconds; this only keeps a broken one from hanging the benchmark.
ATTACH_TIMEOUT_S = 60


class FsyncCountError(RuntimeError):
    """A counting tool is missing, could not attach, or left no count; the message says which and why."""


def _binary(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise FsyncCountError(f"{name} is not installed: W3-fsync counts fsyncs with it")
    return found


def parse_strace(text: str) -> dict[str, int]:
    """The calls of each counted syscall in a ``strace -c`` summary (an empty summary: none made).
    The table's rows are ``% time, seconds, usecs/call, calls, [errors,] syscall``."""
    counts = dict.fromkeys(SYSCALLS, 0)
    for line in text.splitlines():
        cells = line.split()
        if len(cells) >= 5 and cells[-1] in counts:
            if not cells[3].isdigit():
                raise FsyncCountError(f"unexpected strace summary line: {line!r}")
            counts[cells[-1]] = int(cells[3])
    return counts


# perf's count for a counter that never ran while enabled: its task was not scheduled in that window
# (asleep throughout), so none of its syscall tracepoints can have fired. A tracepoint is a software
# event, never multiplexed out for want of hardware counters, so this is a true zero here.
NOT_COUNTED = "<not counted>"


def parse_perf(text: str) -> dict[str, int]:
    """The counts in ``perf stat -x,`` output: ``count,unit,event,...`` per event."""
    counts: dict[str, int] = {}
    for line in text.splitlines():
        cells = line.split(",")
        if len(cells) > 2 and cells[2].startswith("syscalls:sys_enter_"):
            name = cells[2].removeprefix("syscalls:sys_enter_")
            if name in SYSCALLS and cells[0].isdigit():
                counts[name] = int(cells[0])
            elif name in SYSCALLS and cells[0] == NOT_COUNTED:
                counts[name] = 0
    missing = [name for name in SYSCALLS if name not in counts]
    if missing:
        raise FsyncCountError(f"perf counted no {', '.join(missing)} (it printed {text.strip()[-300:]!r})")
    return counts


class _Strace:
    def __init__(self, pid: int, proc: asyncio.subprocess.Process, summary: Path) -> None:
        self.pid, self.proc, self.summary = pid, proc, summary
        self.drain: asyncio.Task[None] | None = None

    @classmethod
    async def attach(cls, pid: int, workdir: Path, index: int) -> _Strace:
        summary = workdir / f"strace-{pid}-{index}.txt"
        summary.unlink(missing_ok=True)
        trace = ["-f", "-c", "-e", f"trace={','.join(SYSCALLS)}", "-o", str(summary), "-p", str(pid)]
        proc = await asyncio.create_subprocess_exec(
            _binary("strace"),
            *trace,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        tracer = cls(pid, proc, summary)
        await _or_kill(proc, tracer._until_attached())
        return tracer

    async def _until_attached(self) -> None:
        """Returns once strace says it is attached (its first line on stderr), then keeps reading its
        stderr (a full pipe would block strace, and the process it holds); fails with what strace said if
        it exits first (no permission to trace, no such process)."""
        assert self.proc.stderr is not None
        said: list[str] = []
        async for raw in self.proc.stderr:
            said.append(raw.decode(errors="replace").strip())
            if f"Process {self.pid} attached" in said[-1]:
                self.drain = asyncio.create_task(_drain(self.proc.stderr))
                return
        code = await self.proc.wait()
        raise FsyncCountError(
            f"strace did not attach to process {self.pid} (exit code {code}): {' | '.join(said)[-400:]}"
        )

    async def stop(self) -> dict[str, int]:
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGINT)  # detach and write the summary
        await self.proc.wait()
        if self.drain is not None:
            await self.drain
        if not self.summary.exists():
            raise FsyncCountError(f"strace on pid {self.pid} wrote no summary (exit {self.proc.returncode})")
        return parse_strace(self.summary.read_text())


async def _or_kill(proc: asyncio.subprocess.Process, attached: Any) -> None:
    """Awaits the tool's attachment (at most ATTACH_TIMEOUT_S); on any failure the tool is ended."""
    try:
        await asyncio.wait_for(attached, ATTACH_TIMEOUT_S)
    except BaseException:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
        raise


async def _drain(stream: asyncio.StreamReader) -> None:
    async for _ in stream:
        pass


class _Perf:
    def __init__(self, pid: int, proc: asyncio.subprocess.Process, output: Path, ctl: int) -> None:
        self.pid, self.proc, self.output, self.ctl = pid, proc, output, ctl
        self.acks = asyncio.StreamReader()
        self.pipe: asyncio.ReadTransport | None = None

    @classmethod
    async def attach(cls, pid: int, workdir: Path, index: int) -> _Perf:
        output = workdir / f"perf-{pid}-{index}.csv"
        ctl_read, ctl_write = os.pipe()
        ack_read, ack_write = os.pipe()
        events = ",".join(f"syscalls:sys_enter_{name}" for name in SYSCALLS)
        command = ["stat", "-x,", "-D", "-1", "--control", f"fd:{ctl_read},{ack_write}", "-o", str(output)]
        try:
            proc = await asyncio.create_subprocess_exec(
                _binary("perf"),
                *command,
                "-e",
                events,
                "-p",
                str(pid),
                pass_fds=(ctl_read, ack_write),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
            )
        finally:
            os.close(ctl_read)
            os.close(ack_write)  # perf holds the only writer: its exit ends the acknowledgements
        counter = cls(pid, proc, output, ctl_write)
        protocol = asyncio.StreamReaderProtocol(counter.acks)
        loop = asyncio.get_running_loop()
        counter.pipe, _ = await loop.connect_read_pipe(lambda: protocol, os.fdopen(ack_read, "rb", 0))
        try:
            await _or_kill(proc, counter._command("enable"))  # counting from its acknowledgement on
        except BaseException:
            os.close(ctl_write)
            counter.pipe.close()
            raise
        return counter

    async def _command(self, word: str) -> None:
        os.write(self.ctl, f"{word}\n".encode())
        answer = await self.acks.readline()
        if b"ack" not in answer:
            code = await self.proc.wait()
            raise FsyncCountError(
                f"perf on process {self.pid} did not acknowledge {word!r} (exit code {code})"
            )

    async def stop(self) -> dict[str, int]:
        try:
            if self.proc.returncode is None:
                await asyncio.wait_for(self._command("disable"), ATTACH_TIMEOUT_S)
                self.proc.send_signal(signal.SIGINT)  # write the counts and leave
            await self.proc.wait()
        finally:
            os.close(self.ctl)
            if self.pipe is not None:
                self.pipe.close()
        if not self.output.exists():
            raise FsyncCountError(f"perf on pid {self.pid} wrote no counts (exit {self.proc.returncode})")
        return parse_perf(self.output.read_text())


TOOLS = {"strace": _Strace, "perf": _Perf}


@contextlib.asynccontextmanager
async def counting_fsyncs(
    processes: list[tuple[str, int]], workdir: Path, tool: str = "strace"
) -> AsyncIterator[list[dict[str, Any]]]:
    """Attach ``tool`` to each (role, pid); on leaving, detach and fill the yielded list with one
    ``{"process": role, "pid": pid, "fsync": n, "fdatasync": n}`` per process."""
    counted: list[dict[str, Any]] = []
    counters: list[tuple[str, int, Any]] = []
    try:
        for role, pid in processes:
            counters.append((role, pid, await TOOLS[tool].attach(pid, workdir, len(counters))))
        yield counted
    finally:
        found = [(role, pid, await counter.stop()) for role, pid, counter in counters]
    counted.extend({"process": role, "pid": pid, **counts} for role, pid, counts in found)


async def perf_usable() -> str | None:
    """None if perf can count syscall tracepoints here, else why not."""
    if shutil.which("perf") is None:
        return "perf is not installed"
    proc = await asyncio.create_subprocess_exec(
        "perf",
        "stat",
        "-x,",
        "-e",
        "syscalls:sys_enter_fsync",
        "--",
        "true",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await proc.communicate()
    said = err.decode(errors="replace").strip()
    return (
        None
        if proc.returncode == 0 and "sys_enter_fsync" in said
        else f"perf cannot count here: {said[-300:]}"
    )
