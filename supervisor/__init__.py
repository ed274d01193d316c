"""The tree of agents: the public Agent, the Runtime that hosts them, delegation and recovery."""

from supervisor.agent import Agent
from supervisor.default import default_runtime
from supervisor.runtime import Runtime

__all__ = ["Agent", "Runtime", "default_runtime"]
