"""The two agents of Mastra's recorded HTTP exchanges (``shared/mastra/http-exchanges.json``), for
``troupe serve --app mastra_http_app:build``: ``approver`` (findUser, approval required) and ``suspender``
(askAge, which suspends). The store and the call log are files named by the environment."""

from __future__ import annotations

import os

from mastra_reference import ask_age, find_user, mastra_like_model

from troupe import Agent, Runtime, SqliteStore
from troupe.testing import CallLog

FINAL = "Final answer. Tool results seen: "


def build() -> Runtime:
    log = CallLog(os.environ["MASTRA_HTTP_LOG"])
    approver = Agent(
        "approver",
        instructions="Use findUser.",
        model=mastra_like_model(log, "approver", [[("findUser", {"name": "Ada"}, "call-1")]], FINAL),
        tools=[find_user(log, require_approval=True)],
    )
    suspender = Agent(
        "suspender",
        instructions="Use askAge.",
        model=mastra_like_model(log, "suspender", [[("askAge", {"name": "Ada"}, "call-1")]], FINAL),
        tools=[ask_age(log)],
    )
    return Runtime([approver, suspender], storage=SqliteStore(os.environ["MASTRA_HTTP_DB"]), executor="local")
