"""Runs an MCP stdio server on a leash: the server ends when the agent host that started it ends.

Started as ``python -I -S leash.py COMMAND ARGS...`` (by path: it imports nothing of Troupe's, so it
starts in a few milliseconds). The MCP client starts it in a process group of its own; the leash starts
the server as its child in that group, and:
- the server's process asks the kernel for SIGKILL when the leash dies (Linux's ``PR_SET_PDEATHSIG``,
  set between fork and exec), so it ends even when the leash is killed outright (Ray kills a dead
  worker's child processes with SIGKILL);
- the leash asks for SIGTERM when the host's process dies, and on SIGTERM, SIGINT or SIGHUP kills its
  whole group, so anything the server started (``npx``'s node, say) goes too.
So the server goes with the host however the host goes: a normal close, a crash, or ``ray.kill``, which
gives the host no chance to close anything itself. Elsewhere than Linux only the normal close applies.
"""

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1
_LINUX = sys.platform.startswith("linux")


def _end_group(signum: int, frame: object) -> None:
    os.killpg(os.getpgid(0), signal.SIGKILL)


def _die_with_parent(signum: int, parent: int) -> None:
    """Have the kernel send ``signum`` to this process when its parent dies (and send it now if the
    parent died already)."""
    if _LINUX:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signum)
        if os.getppid() != parent:
            os.kill(os.getpid(), signum)


def _exec_server(leash: int) -> None:
    """In the forked child: reset what the leash set up, then become the server."""
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, ())
    _die_with_parent(signal.SIGKILL, leash)
    try:
        os.execvp(sys.argv[1], sys.argv[1:])
    except OSError as exc:
        sys.stderr.write(f"cannot start MCP server {sys.argv[1]!r}: {exc}\n")
        os._exit(127)


def main() -> int:
    if len(sys.argv) < 2:
        sys.stderr.write("usage: leash.py COMMAND [ARGS...]\n")
        return 2
    host = os.getppid()
    if os.getpgid(0) != os.getpid():
        os.setpgid(0, 0)  # a group of its own, so ending it ends nothing else
    ending = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    for signum in ending:
        signal.signal(signum, _end_group)
    # A process inherits its parent thread's blocked signals: an agent host's thread may block them.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, ending)
    _die_with_parent(signal.SIGTERM, host)
    leash = os.getpid()
    child = os.fork()
    if child == 0:
        _exec_server(leash)
    while True:
        try:
            _, status = os.waitpid(child, 0)
        except InterruptedError:
            continue
        return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main())
