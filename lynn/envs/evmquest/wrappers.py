"""Observation wrapper for the SB3 path of Lynn/EVMQuest-v0 (``action_mode="skill"``)."""

from __future__ import annotations

import re
import zlib
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

WORD = re.compile(r"[a-z]+|#|%")


class HashedInstructionObs(gym.ObservationWrapper):
    """Encode the instruction as a fixed-size Box: hashed word unigrams and bigrams, plus the step.

    Numbers and addresses are dropped (they are arguments, not intent): the vector says *what*
    the task asks, which is what a skill-choosing policy needs. Entries are counts scaled to
    [0, 1]; the last entry is ``step / max_steps``.

    Args:
        env: an EVMQuest env (any action mode).
        dim: number of hash buckets.
    """

    def __init__(self, env: gym.Env, dim: int = 256) -> None:
        super().__init__(env)
        self.dim = dim
        self.observation_space = spaces.Box(0.0, 1.0, shape=(dim + 1,), dtype=np.float32)

    def observation(self, observation: dict[str, Any]) -> np.ndarray:
        words = WORD.findall(str(observation["instruction"]).lower())
        vec = np.zeros(self.dim + 1, dtype=np.float32)
        for token in words + [f"{a} {b}" for a, b in zip(words, words[1:], strict=False)]:
            vec[zlib.crc32(token.encode()) % self.dim] += 1.0
        vec[: self.dim] = np.minimum(vec[: self.dim] / 3.0, 1.0)
        vec[self.dim] = min(float(observation["step"]) / 3.0, 1.0)
        return vec
