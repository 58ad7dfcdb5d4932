from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.env_util import make_vec_env  # noqa: E402
from stable_baselines3.common.monitor import Monitor  # noqa: E402

from lynn.wrappers.echo.sb3 import EchoSB3VecEnv  # noqa: E402


def _run(cls: type, steps: int = 80) -> list[tuple]:
    """The same seeded CartPole pair under ``cls``, driven with a fixed action schedule."""
    venv = cls([lambda: Monitor(gym.make("CartPole-v1"))] * 2, start_method="fork")
    out: list[tuple] = []
    try:
        venv.seed(3)
        obs = venv.reset()
        assert obs.shape == (2, 4)
        assert venv.env_is_wrapped(Monitor) == [True, True]
        assert venv.get_attr("spec")[0].id == "CartPole-v1" and venv.has_attr("np_random")
        out.append(("reset", obs.copy()))
        for t in range(steps):
            actions = np.array([t % 2, (t // 3) % 2], dtype=np.int64)
            obs, rewards, dones, infos = venv.step(actions)
            # SubprocVecEnv stacks Python floats (float64); ours keeps DummyVecEnv's float32 buffer dtype.
            assert rewards.dtype == (np.float32 if cls is EchoSB3VecEnv else np.float64) and len(infos) == 2
            ends = []
            for done, info in zip(dones, infos, strict=True):
                if done:
                    ends.append(
                        (
                            info["terminal_observation"].copy(),
                            info["TimeLimit.truncated"],
                            info["episode"]["r"],
                            info["episode"]["l"],
                        )
                    )
            out.append((obs.copy(), rewards.copy(), dones.copy(), ends))
    finally:
        venv.close()
    return out


def test_vecenv_contract_matches_subproc() -> None:
    """Step by step on the same seeds, EchoSB3VecEnv gives what SubprocVecEnv gives (obs, rewards, dones,
    terminal observations, Monitor's episode records)."""
    from stable_baselines3.common.vec_env import SubprocVecEnv

    ours, anchor = _run(EchoSB3VecEnv), _run(SubprocVecEnv)
    assert len(ours) == len(anchor)
    assert sum(len(step[3]) for step in anchor[1:]) >= 4  # several episode ends were compared
    np.testing.assert_array_equal(ours[0][1], anchor[0][1])
    for t, (a, b) in enumerate(zip(ours[1:], anchor[1:], strict=True)):
        np.testing.assert_array_equal(a[0], b[0], err_msg=f"obs at step {t}")
        np.testing.assert_array_equal(a[1], b[1], err_msg=f"rewards at step {t}")
        np.testing.assert_array_equal(a[2], b[2], err_msg=f"dones at step {t}")
        assert len(a[3]) == len(b[3]), t
        for x, y in zip(a[3], b[3], strict=True):
            np.testing.assert_array_equal(x[0], y[0])
            assert x[1:] == y[1:], (t, x[1:], y[1:])


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
