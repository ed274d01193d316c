"""The runtime ``troupe mcp --app mcp_stdio_app:runtime`` serves in tests/test_mcp_stdio.py: the HTTP
tests' agents, in-process, on the SQLite file and call log the test names in the environment."""

from __future__ import annotations

import os

from http_server import ops_agents

from troupe import Runtime, SqliteStore
from troupe.testing import CallLog


def runtime() -> Runtime:
    calls = CallLog(os.environ["TROUPE_TEST_CALLS"])
    return Runtime(ops_agents(calls), storage=SqliteStore(os.environ["TROUPE_TEST_DB"]), executor="local")  # type: ignore[arg-type]
