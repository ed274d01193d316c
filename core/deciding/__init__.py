"""Deciding a paused call: which calls need a human, who may decide and how many must agree, claiming a
decision once, handing a delegated one down, and logging it."""
