"""Run a stdio MCP server with its stdin fed through here, each line appended to LOG on its way, so a
test sees what a real server was sent (``notifications/cancelled``, say). Its stdout is the server's own.

    python stdin_recorder.py LOG COMMAND [ARGS...]
"""

from __future__ import annotations

import subprocess
import sys


def main() -> int:
    log, command = sys.argv[1], sys.argv[2:]
    server = subprocess.Popen(command, stdin=subprocess.PIPE)
    assert server.stdin is not None
    with open(log, "ab") as out:
        for line in sys.stdin.buffer:
            out.write(line)
            out.flush()
            server.stdin.write(line)
            server.stdin.flush()
    server.stdin.close()
    return server.wait()


if __name__ == "__main__":
    sys.exit(main())
