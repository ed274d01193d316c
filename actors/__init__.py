"""Ray hosting: the agent host made an actor in one place, handles, and the shared store actor."""
