"""The benchmark's fsync counters (bench/fsync_count.py, W3-fsync's fsyncs per run): strace and perf,
each attached to a running process, count the fsync and fdatasync calls of each of its threads, those it
had before the counter came and those it starts afterwards, and none made before or after; a process
they cannot attach to is a clear error, not a zero."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
from fsync_count import FsyncCountError, counting_fsyncs

# A process that syncs a file from its main thread, from a thread it had before the tracer attached and
# from one it starts after, between two lines from the test; and syncs before and after them too.
SYNCING = """
import os, sys, threading

def sync(fsyncs, fdatasyncs):
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    for call in [os.fsync] * fsyncs + [os.fdatasync] * fdatasyncs:
        os.write(fd, b"x")
        call(fd)
    os.close(fd)

sync(4, 4)  # before the tracer
go = threading.Event()
early = threading.Thread(target=lambda: go.wait() and sync(3, 1))
early.start()
print("ready", flush=True)
sys.stdin.readline()  # the tracer is attached
go.set()
early.join()
late = threading.Thread(target=sync, args=(1, 2))
late.start()
late.join()
sync(1, 0)
print("synced", flush=True)
sys.stdin.readline()  # the tracer is gone
sync(5, 5)
"""


async def _say(proc: asyncio.subprocess.Process, expected: str) -> None:
    assert proc.stdout is not None
    assert (await proc.stdout.readline()).decode().strip() == expected


async def _step(proc: asyncio.subprocess.Process) -> None:
    assert proc.stdin is not None
    proc.stdin.write(b"\n")
    await proc.stdin.drain()


TOOLS = pytest.mark.parametrize("tool", ["strace", "perf"])


@TOOLS
async def test_counts_every_threads_fsyncs_while_attached_and_none_outside(tmp_path: Path, tool: str) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        SYNCING,
        str(tmp_path / "synced.bin"),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        await _say(proc, "ready")
        async with counting_fsyncs([("syncing", proc.pid)], tmp_path, tool) as counted:
            await _step(proc)
            await _say(proc, "synced")
        await _step(proc)
        assert await proc.wait() == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    # main 1 + early thread 3 + late thread 1 fsyncs; early 1 + late 2 fdatasyncs.
    assert counted == [{"process": "syncing", "pid": proc.pid, "fsync": 5, "fdatasync": 3}]


@TOOLS
async def test_a_process_that_makes_none_counts_zero(tmp_path: Path, tool: str) -> None:
    """The process is asleep the whole time it is counted (it said so, then waits on its stdin): perf then
    reports its counters as never run (``<not counted>``), which is a zero, not a failure to count."""
    asleep = "import sys; print('asleep', flush=True); sys.stdin.readline()"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", asleep, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None
    assert await proc.stdout.readline() == b"asleep\n"
    async with counting_fsyncs([("idle", proc.pid)], tmp_path, tool) as counted:
        pass
    await _step(proc)
    assert await proc.wait() == 0
    assert counted == [{"process": "idle", "pid": proc.pid, "fsync": 0, "fdatasync": 0}]


@pytest.mark.parametrize(
    ("tool", "says"), [("strace", "strace did not attach to process"), ("perf", "perf on process")]
)
async def test_a_process_it_cannot_attach_to_is_an_error_naming_it(
    tmp_path: Path, tool: str, says: str
) -> None:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
    assert await proc.wait() == 0  # gone: nothing to attach to
    with pytest.raises(FsyncCountError, match=f"{says} {proc.pid}"):
        async with counting_fsyncs([("gone", proc.pid)], tmp_path, tool):
            pass
