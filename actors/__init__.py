"""Ray hosting: the agent host made an actor in one place, and the handles that reach it."""
