"""action_mode="skill": every skill task is solved by its skill, and the Box wrapper suits SB3."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import lynn  # noqa: F401
from lynn.envs.evmquest.evmquest_env import EVMQuestEnv
from lynn.envs.evmquest.skills import SKILL_NAMES, TASK_SKILL
from lynn.envs.evmquest.wrappers import HashedInstructionObs
from tests.conftest import REPO, run_python


@pytest.fixture(scope="module")
def skill_env() -> EVMQuestEnv:
    env = EVMQuestEnv(task=list(TASK_SKILL), action_mode="skill")
    yield env
    env.close()


@pytest.mark.parametrize("task_id", sorted(TASK_SKILL))
def test_right_skill_solves_task_wrong_skill_does_not(skill_env: EVMQuestEnv, task_id: str) -> None:
    skill_env.reset(seed=5, options={"task_id": task_id})
    _, reward, terminated, _, info = skill_env.step(SKILL_NAMES.index(TASK_SKILL[task_id]))
    assert terminated and reward == 1.0, (info["error"], info.get("checks"))
    assert info["skill"] == TASK_SKILL[task_id]
    skill_env.reset(seed=5, options={"task_id": task_id})
    wrong = (SKILL_NAMES.index(TASK_SKILL[task_id]) + 1) % len(SKILL_NAMES)
    _, reward, _, _, info = skill_env.step(wrong)
    assert reward < 1.0


def test_wrapped_skill_env_is_sb3_ready(skill_env: EVMQuestEnv) -> None:
    made = gym.make("Lynn/EVMQuest-v0", task=sorted(TASK_SKILL)[:3], action_mode="skill")
    try:
        check_env(made.unwrapped, skip_render_check=True)
    finally:
        made.close()
    env = HashedInstructionObs(skill_env, dim=64)
    obs, _ = env.reset(seed=0, options={"task_id": "wbnb_deposit"})
    assert env.observation_space.contains(obs) and obs.shape == (65,)
    other, _ = env.reset(seed=0, options={"task_id": "query_gas_price"})
    assert not np.array_equal(obs, other)
    assert isinstance(env.action_space, gym.spaces.Discrete)
    _, reward, _, _, info = env.step(len(SKILL_NAMES) + 3)
    assert reward == 0.0 and "out of range" in info["error"]


@pytest.mark.slow
def test_ppo_example_learns_skill_choice() -> None:
    script = REPO / "examples" / "evmquest_ppo_skills.py"
    code = (
        "import runpy, sys; "
        f"sys.argv = [{str(script)!r}, '--timesteps', '1024', '--eval-episodes', '20', '--json']; "
        f"runpy.run_path({str(script)!r}, run_name='__main__')"
    )
    proc = run_python(code, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["ppo"] >= result["random"] + 0.3, result
