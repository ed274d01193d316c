"""For the people who run Troupe rather than build on it: the operator commands (``troupe runs``,
``troupe approve|decline|resume``), the notebook panel, the terminal demo, and what they share (finding a
runtime or a store, printing safely to a terminal, remembering a chosen call).

The public names stay where users know them: ``troupe.notebook`` (re-exported from here) and the
``troupe`` command (``troupe.cli``)."""
