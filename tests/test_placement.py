"""Placement per agent: Ray actor options and replica counts are checked when the Runtime is built, so a
typo is a clear error naming it rather than an actor placed somewhere by default."""

from __future__ import annotations

import pytest
from troupe.supervisor.placement import check_actor_options, options_for

from troupe import Agent, Runtime
from troupe.errors import InvalidOptionError
from troupe.testing import text


def _agent() -> Agent:
    from troupe.testing import FunctionModel

    return Agent("data", model=FunctionModel(lambda messages, tools: text("ok")))


def test_an_option_an_agents_actor_cannot_take_is_named():
    with pytest.raises(InvalidOptionError, match=r"actor_options\['data'\] has 'lifetime', 'nme'"):
        Runtime([_agent()], executor="local", actor_options={"data": {"nme": "x", "lifetime": "detached"}})
    with pytest.raises(InvalidOptionError, match="must be a dict"):
        Runtime([_agent()], executor="local", actor_options={"data": ["resources"]})


@pytest.mark.parametrize("count", [0, -1, 1.5, True, "2"])
def test_replicas_must_be_a_whole_number_of_actors(count):
    with pytest.raises(InvalidOptionError, match=r"replicas\['data'\] must be a whole number"):
        Runtime([_agent()], executor="local", replicas={"data": count})


def test_an_agents_own_options_win_over_the_default_for_every_agent():
    checked = check_actor_options({"*": {"num_gpus": 1}, "data": {"resources": {"worker": 1}}})
    assert options_for(checked, "data") == {"resources": {"worker": 1}}
    assert options_for(checked, "other") == {"num_gpus": 1}
    assert options_for(check_actor_options(None), "data") == {}


def test_a_scheduling_strategy_on_an_actor_that_asks_for_nothing_gets_a_token_request():
    # Ray ignores a soft node affinity for an actor with no resource request (see placement.py).
    checked = check_actor_options({"a": {"scheduling_strategy": "SPREAD"}, "b": {"num_cpus": 1}})
    assert options_for(checked, "a") == {"scheduling_strategy": "SPREAD", "memory": 1}
    assert options_for(checked, "b") == {"num_cpus": 1}
