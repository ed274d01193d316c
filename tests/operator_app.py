"""The runtime ``troupe ... --app operator_app:runtime`` loads in the operator CLI tests (paths from env)."""

from __future__ import annotations

import os

from http_server import ops_agents

from troupe import Runtime, SqliteStore
from troupe.testing import CallLog


def runtime() -> Runtime:
    calls = CallLog(os.environ["TROUPE_TEST_CALLS"])
    return Runtime(ops_agents(calls), storage=SqliteStore(os.environ["TROUPE_TEST_STORE"]), executor="local")


def governed() -> Runtime:
    """The same runtime with ``delete_record`` governed by an approver policy (role ``dba``)."""
    from troupe.core.deciding.approvers import ApproverPolicy

    calls = CallLog(os.environ["TROUPE_TEST_CALLS"])
    policy = ApproverPolicy(tool="delete_record", roles=frozenset({"dba"}))
    return Runtime(
        ops_agents(calls),
        storage=SqliteStore(os.environ["TROUPE_TEST_STORE"]),
        executor="local",
        approver_policies=[policy],
    )
