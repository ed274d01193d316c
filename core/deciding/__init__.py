"""Deciding a paused call, as pure state work: which calls need a human, who may decide and how many must
agree, the ruling on a decision or a cancel and what it writes into the run, the hand-off of a delegated
one, and the decision log. Claiming one against the store is the run's (``troupe.core.run.claim``)."""
