"""Every registered id, made with its defaults (no kwargs: the world-model env loads the zoo's models),
passes Gymnasium's env checker (as Gymnasium's own tests/envs/test_envs.py)."""

from __future__ import annotations

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import lynn


@pytest.mark.parametrize("env_id", lynn.ENV_IDS)
def test_check_env_with_defaults(env_id: str) -> None:
    env = gym.make(env_id, disable_env_checker=True).unwrapped
    try:
        check_env(env, skip_render_check=True)
    finally:
        env.close()


BAD_TEXT = "definitely not an action((("


def _bad_action(space: gym.Space):
    if isinstance(space, gym.spaces.Discrete):
        return int(space.start + space.n + 3)
    if space.contains(BAD_TEXT):  # any text space (gym.spaces.Text or the envs' own Unicode spaces)
        return BAD_TEXT
    return None


# The error each env gives the bad action above (a new env id must be added here).
BAD_ACTION_ERRORS = {
    "Lynn/EVMQuest-v0": "SyntaxError: ",
    "Lynn/LiveWeb-v0": "no action found in 'definitely not an action((('",
    "Lynn/WebWorldModel-v0": "no action found in 'definitely not an action((('",
    "Lynn/Coordination-v0": "is out of range [0, ",
}


@pytest.mark.parametrize("env_id", lynn.ENV_IDS)
def test_random_agent_episode_and_bad_action_never_raises(env_id: str) -> None:
    from lynn.agents import make_agent

    env = gym.make(env_id)
    try:
        agent = make_agent("random", env)
        obs, info = env.reset(seed=1)
        agent.reset(seed=2)
        assert "task_id" in info
        for _ in range(3):
            obs, reward, terminated, truncated, info = env.step(agent.act(obs, info))
            assert isinstance(reward, float | int)
            assert "error" in info and "timings" in info
            if terminated or truncated:
                obs, info = env.reset(seed=3)
        bad = _bad_action(env.action_space)
        assert bad is not None, f"no malformed action known for {env.action_space}"
        obs, info = env.reset(seed=4)
        obs, reward, terminated, truncated, info = env.unwrapped.step(bad)
        assert reward == 0 and info["error"], "a malformed action must give reward 0 and info['error']"
        assert BAD_ACTION_ERRORS[env_id] in info["error"], info["error"]
        if not (terminated or truncated):  # the env stays usable
            env.unwrapped.step(agent.act(obs, info))
    finally:
        env.close()
