"""Runs an MCP stdio server on a leash: the server ends when the agent host that started it ends.

Started as ``python -I -S leash.py COMMAND ARGS...`` (by path: it imports nothing of Troupe's, so it
starts in a few milliseconds). The MCP client already starts it in a process group of its own; here it
asks the kernel for SIGTERM when its parent dies (Linux's ``PR_SET_PDEATHSIG``), starts the server as
its child in that group, and on SIGTERM, SIGINT or SIGHUP kills the whole group. So the server (and
anything it started, like ``npx``'s node) goes with the host whichever way the host goes: a normal
close, a crash, or ``ray.kill``, which gives the host no chance to close anything itself. Elsewhere than
Linux only the normal close applies.
"""

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1


def _end_group(signum: int, frame: object) -> None:
    os.killpg(os.getpgid(0), signal.SIGKILL)


def main() -> int:
    if len(sys.argv) < 2:
        sys.stderr.write("usage: leash.py COMMAND [ARGS...]\n")
        return 2
    parent = os.getppid()
    if os.getpgid(0) != os.getpid():
        os.setpgid(0, 0)  # a group of its own, so ending it ends nothing else
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, _end_group)
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before the request took hold
            _end_group(signal.SIGTERM, None)
    try:
        child = os.posix_spawnp(sys.argv[1], sys.argv[1:], os.environ)
    except OSError as exc:
        sys.stderr.write(f"cannot start MCP server {sys.argv[1]!r}: {exc}\n")
        return 127
    while True:
        try:
            _, status = os.waitpid(child, 0)
        except InterruptedError:
            continue
        return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main())
