"""Small envs for testing the runner and CLI (registered under the ``LynnTest/`` namespace).

They are test fixtures, not part of the package: ``gym.make("tests._envs:LynnTest/Guess-v0")``.
"""

from __future__ import annotations

import os
import time
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

TASKS = [
    {"task_id": f"guess-{k}", "split": "train" if k < 3 else "test", "description": f"guess {k}"}
    for k in range(5)
]


class GuessEnv(gym.Env):
    """Guess a hidden digit in 3 tries; reward 1 on a hit. The digit comes from the seed or the task."""

    def __init__(
        self,
        delay: float = 0.0,
        crash_on_seed: int | None = None,
        split: str | None = None,
        die_on_seed: int | None = None,
    ) -> None:
        self.action_space = spaces.Discrete(10)
        self.observation_space = spaces.Box(0, 3, shape=(1,), dtype=np.float32)
        self.delay = delay
        self.crash_on_seed = crash_on_seed
        self.seed_used: int | None = None
        self.split = split
        self.die_on_seed = die_on_seed

    @classmethod
    def list_tasks(cls, split: str | None = None, **_: Any) -> list[dict[str, Any]]:
        if split not in (None, "train", "test"):
            raise ValueError(f"unknown split {split!r}; use train or test")
        return [t for t in TASKS if split is None or t["split"] == split]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.seed_used = seed
        task = (options or {}).get("task_id")
        self.task_id = task or "seeded"
        self.target = int(task.split("-")[1]) if task else int(self.np_random.integers(10))
        self.tries = 0
        return np.zeros(1, np.float32), {"task_id": self.task_id}

    def step(self, action: int):
        if self.crash_on_seed is not None and self.seed_used == self.crash_on_seed:
            raise RuntimeError("simulated env crash")
        if self.die_on_seed is not None and self.seed_used == self.die_on_seed:
            os._exit(3)  # the process dies with no Python exception (as a native crash would)
        time.sleep(self.delay)
        self.tries += 1
        hit = int(action) == self.target
        done = hit or self.tries >= 3
        info = {"task_id": self.task_id, "success": hit, "error": None if 0 <= int(action) < 10 else "bad"}
        return np.array([self.tries], np.float32), float(hit), done, False, info


gym.register("LynnTest/Guess-v0", entry_point="tests._envs:GuessEnv", max_episode_steps=10)
