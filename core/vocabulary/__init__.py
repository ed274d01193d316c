"""The run's vocabulary: what every layer speaks. The agent's definition and tools, run state and its
pauses, chunks, requests, results, the model interface, the store protocol and the errors."""
