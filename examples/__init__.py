"""Runnable examples (not installed with Troupe): ``examples.cluster_agents`` is imported by the cluster job's
Ray workers and by whoever decides its pauses later, so it must have the same module name everywhere."""
