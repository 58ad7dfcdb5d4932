from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.env_util import make_vec_env  # noqa: E402
from stable_baselines3.common.monitor import Monitor  # noqa: E402

from lynn.wrappers.echo.sb3 import EchoSB3VecEnv  # noqa: E402


def test_vecenv_contract_matches_subproc() -> None:
    venv = EchoSB3VecEnv([lambda: Monitor(gym.make("CartPole-v1"))] * 2, start_method="fork")
    try:
        venv.seed(3)
        obs = venv.reset()
        assert obs.shape == (2, 4)
        assert venv.env_is_wrapped(Monitor) == [True, True]
        assert venv.get_attr("spec")[0].id == "CartPole-v1"
        assert venv.has_attr("np_random")
        dones_seen = 0
        for _ in range(60):
            obs, rewards, dones, infos = venv.step(np.ones(2, dtype=np.int64))
            assert rewards.dtype == np.float32 and len(infos) == 2
            for done, info in zip(dones, infos, strict=True):
                if done:
                    dones_seen += 1
                    assert info["terminal_observation"].shape == (4,)
                    assert "episode" in info and "TimeLimit.truncated" in info
        assert dones_seen >= 2
    finally:
        venv.close()


@pytest.mark.slow
def test_ppo_trains_through_the_adapter() -> None:
    venv = make_vec_env(
        "CartPole-v1", n_envs=4, seed=0, vec_env_cls=EchoSB3VecEnv, vec_env_kwargs={"start_method": "fork"}
    )
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny MLP: extra threads only contend on a shared 2-core machine
    try:
        model = PPO("MlpPolicy", venv, n_steps=128, batch_size=64, n_epochs=4, seed=0, device="cpu")
        model.learn(6144)
        lengths = [ep["l"] for ep in model.ep_info_buffer]
        # A random CartPole policy lasts ~22 steps; PPO through the adapter must clearly beat it.
        assert np.mean(lengths[-20:]) > 45
    finally:
        torch.set_num_threads(threads)
        venv.close()
