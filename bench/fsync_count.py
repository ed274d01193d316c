"""Counting a process's fsyncs with strace, for W3-fsync's counted pass (no Troupe or Ray imports: the
peers' processes use it too).

``strace -f -c -e trace=fsync,fdatasync -p PID`` attaches to every thread of PID (and follows the ones it
starts), counts those two calls and, when it gets SIGINT, detaches and writes its summary. Attached with
``-p`` it cannot install a seccomp filter (strace does that only for processes it starts), so the traced
process stops at every system call it makes, counted or not, and runs slower: the harness counts on a
separate pass after the timed one and reports that pass's time beside the timed one.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

SYSCALLS = ("fsync", "fdatasync")
# strace answers "Process N attached" within milliseconds; this only keeps a broken strace from hanging.
ATTACH_TIMEOUT_S = 60


class StraceError(RuntimeError):
    """strace is missing, could not attach, or left no summary; the message says which and why."""


async def _attached(proc: asyncio.subprocess.Process, pid: int) -> None:
    """Returns once strace says it is attached to ``pid`` (its first line on stderr); fails with what
    strace said if it exits first (no permission to trace, no such process)."""
    assert proc.stderr is not None
    said: list[str] = []
    async for raw in proc.stderr:
        line = raw.decode(errors="replace").strip()
        said.append(line)
        if f"Process {pid} attached" in line:
            return
    code = await proc.wait()
    raise StraceError(f"strace did not attach to process {pid} (exit code {code}): {' | '.join(said)[-400:]}")


async def _drain(proc: asyncio.subprocess.Process) -> None:
    """Reads strace's stderr to its end: a full pipe would block strace, and the process it holds."""
    assert proc.stderr is not None
    async for _ in proc.stderr:
        pass


def parse_summary(text: str) -> dict[str, int]:
    """The calls of each counted syscall in a ``strace -c`` summary (an empty summary: none made).

    The table's rows are ``% time, seconds, usecs/call, calls, [errors,] syscall``."""
    counts = dict.fromkeys(SYSCALLS, 0)
    for line in text.splitlines():
        cells = line.split()
        if len(cells) >= 5 and cells[-1] in counts:
            if not cells[3].isdigit():
                raise StraceError(f"unexpected strace summary line: {line!r}")
            counts[cells[-1]] = int(cells[3])
    return counts


@contextlib.asynccontextmanager
async def counting_fsyncs(
    processes: list[tuple[str, int]], workdir: Path
) -> AsyncIterator[list[dict[str, Any]]]:
    """Attach one strace to each (role, pid); on leaving, detach and fill the yielded list with one
    ``{"process": role, "pid": pid, "fsync": n, "fdatasync": n}`` per process."""
    binary = shutil.which("strace")
    if binary is None:
        raise StraceError("strace is not installed: W3-fsync counts fsyncs with it (apt-get install strace)")
    counted: list[dict[str, Any]] = []
    tracers: list[tuple[str, int, asyncio.subprocess.Process, Path, asyncio.Task[None]]] = []
    try:
        for role, pid in processes:
            summary = workdir / f"strace-{pid}-{len(tracers)}.txt"
            summary.unlink(missing_ok=True)
            command = ["-f", "-c", "-e", f"trace={','.join(SYSCALLS)}", "-o", str(summary), "-p", str(pid)]
            proc = await asyncio.create_subprocess_exec(
                binary,
                *command,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
            )
            try:
                await asyncio.wait_for(_attached(proc, pid), ATTACH_TIMEOUT_S)
            except BaseException:
                if proc.returncode is None:
                    proc.kill()
                await proc.wait()
                raise
            tracers.append((role, pid, proc, summary, asyncio.create_task(_drain(proc))))
        yield counted
    finally:
        for _role, _pid, proc, _summary, drain in tracers:
            if proc.returncode is None:
                proc.send_signal(signal.SIGINT)  # detach and write the summary
            await proc.wait()
            await drain
    for role, pid, proc, summary, _drain_task in tracers:
        if not summary.exists():
            raise StraceError(f"strace on {role} (pid {pid}) wrote no summary (exit code {proc.returncode})")
        counted.append({"process": role, "pid": pid, **parse_summary(summary.read_text())})
