"""Models behind the ``Model`` interface: OpenAI-compatible servers, and deterministic fakes for tests
and demos."""
