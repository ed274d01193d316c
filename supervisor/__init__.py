"""The tree of agents: the public Agent, the Runtime that hosts them, and their supervision (one
reconciliation loop per Runtime: ``troupe.supervisor.reconciler``)."""

from troupe.supervisor.agent import Agent
from troupe.supervisor.default import default_runtime
from troupe.supervisor.runtime import Runtime

__all__ = ["Agent", "Runtime", "default_runtime"]
