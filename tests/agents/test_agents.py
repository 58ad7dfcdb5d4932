from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from lynn.agents import Agent, UnknownAgentError, available_agents, make_agent
from lynn.agents.random_agent import RandomAgent


def test_make_agent_by_name_and_by_module_path() -> None:
    env = gym.make("CartPole-v1")
    assert isinstance(make_agent("random", env), RandomAgent)
    agent = make_agent("lynn.agents.random_agent:RandomAgent", env)
    assert isinstance(agent, RandomAgent) and agent.name == "random"
    assert "random" in available_agents()


@pytest.mark.parametrize("name", ["nope", "lynn.agents:Nope", "no_such_module:Agent", "x:"])
def test_unknown_agent_is_a_clear_error(name: str) -> None:
    with pytest.raises(UnknownAgentError, match="agent"):
        make_agent(name, gym.make("CartPole-v1"))


def test_random_agent_is_seeded() -> None:
    env = gym.make("CartPole-v1")
    a, b = make_agent("random", env), make_agent("random", env)
    a.reset(seed=7)
    b.reset(seed=7)
    assert [a.act(None, {}) for _ in range(20)] == [b.act(None, {}) for _ in range(20)]


def test_random_agent_respects_action_mask() -> None:
    env = gym.make("CartPole-v1")
    env.action_space = gym.spaces.Discrete(5)
    agent = make_agent("random", env)
    agent.reset(seed=0)
    mask = np.array([0, 0, 1, 0, 1], dtype=np.int8)
    picks = {agent.act({"action_mask": mask}, {}) for _ in range(50)}
    assert picks == {2, 4}


def test_agent_base_rejects_unknown_options() -> None:
    with pytest.raises(TypeError, match="takes no options"):
        RandomAgent(gym.make("CartPole-v1"), temperature=1.0)
    with pytest.raises(TypeError, match="abstract"):
        Agent()  # act() is the one method every agent must write
