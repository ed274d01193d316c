"""Where an agent's actor runs: the Ray actor options a Runtime applies per agent definition.

Given as ``Runtime(actor_options={agent_id: {...}})``, with ``"*"`` for every agent without its own
entry. The options are Ray's own (``resources``, ``scheduling_strategy`` such as
``NodeAffinitySchedulingStrategy`` or ``"SPREAD"``, ``runtime_env``, ...), checked here against the
ones that make sense for an agent's actor, so a typo is a clear error instead of a silent default.
Troupe keeps ``num_cpus=0`` unless told otherwise (an agent mostly waits on its model and tools).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from troupe.core.vocabulary.errors import InvalidOptionError

# Options that say where and with what an actor runs. Left out on purpose: ``name``/``namespace``
# (Troupe names its actors), ``lifetime`` (tied to the runtime), ``max_task_retries`` (a replayed step
# could run a tool twice).
PLACEMENT_OPTIONS = frozenset(
    {
        "resources",
        "num_cpus",
        "num_gpus",
        "memory",
        "accelerator_type",
        "scheduling_strategy",
        "label_selector",
        "runtime_env",
        "max_restarts",
        "max_concurrency",
    }
)
EVERY_AGENT = "*"


def check_actor_options(options: Mapping[str, Mapping[str, Any]] | None) -> dict[str, dict[str, Any]]:
    """The per-agent options, copied; ``InvalidOptionError`` naming any option an agent cannot take."""
    checked: dict[str, dict[str, Any]] = {}
    for agent_id, given in (options or {}).items():
        if not isinstance(given, Mapping):
            raise InvalidOptionError(f"actor_options[{agent_id!r}] must be a dict of Ray actor options")
        unknown = sorted(set(given) - PLACEMENT_OPTIONS)
        if unknown:
            raise InvalidOptionError(
                f"actor_options[{agent_id!r}] has {', '.join(map(repr, unknown))}, which an agent's actor "
                f"cannot take; allowed: {', '.join(sorted(PLACEMENT_OPTIONS))}",
                agent_id=agent_id,
            )
        checked[agent_id] = dict(given)
    return checked


def check_replicas(replicas: Mapping[str, int] | None) -> dict[str, int]:
    checked = dict(replicas or {})
    for agent_id, count in checked.items():
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise InvalidOptionError(
                f"replicas[{agent_id!r}] must be a whole number of actors, at least 1; got {count!r}",
                agent_id=agent_id,
            )
    return checked


def options_for(checked: Mapping[str, dict[str, Any]], agent_id: str) -> dict[str, Any]:
    options = dict(checked.get(agent_id, checked.get(EVERY_AGENT, {})))
    asks = (
        options.get("num_cpus")
        or options.get("num_gpus")
        or options.get("memory")
        or options.get("resources")
    )
    if "scheduling_strategy" in options and not asks:
        # Ray schedules an actor that asks for no resource at all wherever it likes, ignoring a soft
        # node affinity (seen with Ray 2.60 on a cluster_utils cluster): one byte of memory makes the
        # strategy count, and costs nothing.
        options["memory"] = 1
    return options


__all__ = [
    "EVERY_AGENT",
    "PLACEMENT_OPTIONS",
    "check_actor_options",
    "check_replicas",
    "options_for",
]
