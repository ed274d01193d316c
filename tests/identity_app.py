"""The runtime that ``troupe approve --app identity_app:runtime`` loads in the identity tests: the ``ops``
agent under separation of duties and a quorum of two, on the test's SQLite file (paths from env)."""

from __future__ import annotations

import os

from http_server import ops_agents
from test_decision_links import SIGNER
from troupe.core.deciding.approvers import ApproverPolicy
from troupe.core.notifying.outbox import Notifications

from troupe import Runtime, SqliteStore
from troupe.testing import CallLog

POLICY = ApproverPolicy(agent="ops", tool="delete_record", separation_of_duties=True, quorum=2)


def runtime() -> Runtime:
    calls = CallLog(os.environ["TROUPE_TEST_CALLS"])
    return Runtime(
        ops_agents(calls),
        storage=SqliteStore(os.environ["TROUPE_TEST_STORE"]),
        executor="local",
        notifications=Notifications((), links=SIGNER),
        approver_policies=[POLICY],
    )
