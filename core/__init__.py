"""Troupe's core, free of Ray, in folders that follow a run's flow:

- ``vocabulary``: what every layer speaks (agent, tools, state, chunks, requests, store protocol, errors);
- ``run``: the engine and the loop that drive a run (turns, calls, pauses, delegation, recovery);
- ``deciding``: who may decide a paused call and how a decision is claimed once;
- ``notifying``: the outbox of events, their delivery as webhooks, decision links;
- ``models``: the OpenAI-compatible model and the deterministic fakes.

``tracing`` and ``cancellation`` serve all of them.
"""
