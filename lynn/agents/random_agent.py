"""The uniform random agent: a floor for every leaderboard."""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np

from lynn.agents import Agent


class RandomAgent(Agent):
    """Samples the env's action space; respects ``obs["action_mask"]`` when the env gives one.

    Works for every registered env: Discrete, Box, Text and Dict action spaces all sample.
    """

    name = "random"

    def __init__(self, env: gym.Env, **kwargs: Any) -> None:
        super().__init__(env, **kwargs)
        # Its own copy: seeding must not reset the RNG of the env's (shared) space.
        self.action_space = copy.deepcopy(env.action_space)

    def reset(self, seed: int | None = None) -> None:
        self.action_space.seed(seed)

    def act(self, obs: Any, info: dict[str, Any]) -> Any:
        mask = obs.get("action_mask") if isinstance(obs, dict) else None
        if mask is not None and isinstance(self.action_space, gym.spaces.Discrete):
            mask = np.asarray(mask, dtype=np.int8)
            if mask.any():
                return self.action_space.sample(mask=mask)
        return self.action_space.sample()
