"""Runnable examples (not installed with Troupe). The cluster job runs with this folder as its working
directory, so its scripts import ``cluster_agents`` by that name (see cluster_job.py)."""
