"""The run's vocabulary: what every layer speaks. Tools, hooks, options, run state and its pauses, chunks,
requests, results, the model interface, the store protocol and the errors. It imports nothing of
Troupe's from above it (the import-linter contracts in pyproject.toml hold it there)."""
