"""Troupe's core, free of Ray, in folders that follow a run's flow:

- ``vocabulary``: what every layer speaks (tools, options, state, chunks, requests, store protocol, errors);
- ``models``: the OpenAI-compatible model, models given by name, and the deterministic fakes;
- ``deciding``: which calls need a human, who may decide them, and a decision or a cancel as state;
- ``notifying``: the outbox of events, their delivery as webhooks, decision links;
- ``run``: the agent's definition, and the engine and the loop that drive a run (turns, calls, pauses,
  delegation, recovery, claiming a decision or a cancel once).

Each imports only those listed before it, save that models, deciding and notifying never import one
another; ``tracing`` and ``cancellation`` serve all of them and import none. The import-linter contracts
in pyproject.toml hold this order.
"""
