"""The run: an engine opens operations (a start, a decision, an expiry, a recovery, a cancel), claims a
decision or a cancel with a compare-and-set, and the loop drives each through model turns, tool calls,
delegations and pauses, checkpointing as it goes."""
