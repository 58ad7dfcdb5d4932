"""Stable-Baselines3 adapter: :class:`EchoSB3VecEnv` is a drop-in for ``SubprocVecEnv``.

::

    from stable_baselines3 import PPO
    from lynn.wrappers.echo.sb3 import EchoSB3VecEnv

    venv = EchoSB3VecEnv([lambda: gym.make("CartPole-v1")] * 4)
    PPO("MlpPolicy", venv).learn(10_000)

SB3's VecEnv contract is synchronous (every env steps every call), so the adapter steps all envs
(``batch_size == num_envs``); what it adds to ``SubprocVecEnv`` is the shared-memory observation
path, a step ``timeout`` and opt-in restarts of failed envs (``on_error="restart"``), with the same
worker code as the async ``EchoVectorEnv``. Done envs carry ``info["terminal_observation"]`` and
``info["TimeLimit.truncated"]`` as SB3 expects; Dict/Tuple action spaces take SB3's per-env list
of actions. ``tests/wrappers/echo/test_echo_conformance.py`` runs its claims against ``SubprocVecEnv``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices, VecEnvObs, VecEnvStepReturn

from lynn.wrappers.echo.vector import EchoVectorEnv

__all__ = ["EchoSB3VecEnv"]


def _is_wrapped(env: gym.Env, wrapper_class: type[gym.Wrapper]) -> bool:
    from stable_baselines3.common.env_util import is_wrapped

    return is_wrapped(env, wrapper_class)


def _has_attr(env: gym.Env, name: str) -> bool:
    try:
        env.get_wrapper_attr(name)
    except AttributeError:
        return False
    return True


def _render(env: gym.Env) -> Any:
    return env.render()


class EchoSB3VecEnv(VecEnv):
    """An SB3 ``VecEnv`` over :class:`~lynn.wrappers.echo.vector.EchoVectorEnv` worker processes.

    Args:
        env_fns: one callable per env, each returning a fresh env.
        start_method: multiprocessing start method (default ``forkserver`` where available, like
            ``SubprocVecEnv``).
        shared_memory: pass observations through shared memory where the space allows it.
        on_error: ``"raise"`` (default, like ``SubprocVecEnv``) or ``"restart"``: a failed env is
            restarted, its row is ``done`` with ``info["TimeLimit.truncated"]``, the episode's
            last observation as ``info["terminal_observation"]`` and ``info["error"]``.
        max_restarts: the restart budget with ``on_error="restart"``.
        timeout: seconds one env's step may take before its worker is killed (None: no limit).
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        start_method: str | None = None,
        shared_memory: bool = True,
        *,
        on_error: str = "raise",
        max_restarts: int = 100,
        timeout: float | None = None,
    ) -> None:
        import multiprocessing as mp

        if start_method is None:
            start_method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
        self.venv = EchoVectorEnv(
            env_fns,
            shared_memory=shared_memory,
            context=start_method,
            autoreset_mode=AutoresetMode.SAME_STEP,  # SB3 wants terminal_observation in the done step
            on_error=on_error,
            max_restarts=max_restarts,
            timeout=timeout,
        )
        super().__init__(len(env_fns), self.venv.single_observation_space, self.venv.single_action_space)

    def step_async(self, actions: Any) -> None:
        # SB3 passes an array with one row per env, or a list of per-env actions (Dict/Tuple spaces).
        if isinstance(actions, dict):
            per_env = self.venv._split_actions(actions, self.num_envs)
        else:
            per_env = list(actions)
        if len(per_env) != self.num_envs:
            raise ValueError(f"step_async() got {len(per_env)} actions for {self.num_envs} envs")
        ids = self.venv._check_ids(None)
        self.venv._send_steps(ids, per_env)

    def step_wait(self) -> VecEnvStepReturn:
        ids = self.venv._gather_all(self.venv.timeout)
        obs, rewards, terminated, truncated, _ = self.venv._package(ids)
        infos: list[dict[str, Any]] = []
        for i, raw in enumerate(self.venv.last_infos):
            done = bool(terminated[i] or truncated[i])
            if done:
                info = dict(raw.get("final_info") or {})
                info["terminal_observation"] = raw.get("final_obs")
                for key in ("worker_restarted", "error"):
                    if key in raw:
                        info[key] = raw[key]
                self.reset_infos[i] = {k: v for k, v in raw.items() if k not in ("final_obs", "final_info")}
            else:
                info = dict(raw)
            info["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
            infos.append(info)
        return obs, rewards.astype(np.float32), terminated | truncated, infos

    def reset(self) -> VecEnvObs:
        seeds = [s if s is None else int(s) for s in self._seeds]
        options = [o or None for o in self._options]
        self.venv._assert_open()
        self.venv._state = None
        self.venv._send_resets(seeds, options)
        ids = self.venv._gather_all(self.venv.timeout)
        obs, _, _, _, _ = self.venv._package(ids)
        self.reset_infos = [dict(i) for i in self.venv.last_infos]
        self._reset_seeds()
        self._reset_options()
        return obs

    def close(self) -> None:
        self.venv.close()

    def get_images(self) -> Sequence[np.ndarray | None]:
        return self.venv.apply_on(range(self.num_envs), _render)

    def has_attr(self, attr_name: str) -> bool:
        return all(self.venv.apply_on(range(self.num_envs), _has_attr, attr_name))

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        return self.venv.call_on(list(self._get_indices(indices)), attr_name)

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        self.venv.set_attr_on(list(self._get_indices(indices)), attr_name, value)

    def env_method(
        self, method_name: str, *method_args: Any, indices: VecEnvIndices = None, **method_kwargs: Any
    ) -> list[Any]:
        return self.venv.call_on(list(self._get_indices(indices)), method_name, *method_args, **method_kwargs)

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        return self.venv.apply_on(list(self._get_indices(indices)), _is_wrapped, wrapper_class)

    @property
    def restarts(self) -> int:
        """Worker processes restarted so far."""
        return self.venv.restarts
