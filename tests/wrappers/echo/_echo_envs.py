"""Small envs for the Echo wrapper tests (test fixtures, not part of the package)."""

from __future__ import annotations

import os
import time
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class AnyText(spaces.Space[str]):
    """A text space that accepts any Unicode string (no shared-memory layout, so it is pickled)."""

    def __init__(self) -> None:
        super().__init__(shape=None, dtype=None)

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        return "".join(chr(int(c)) for c in self.np_random.integers(0x61, 0x7A, size=5))

    def contains(self, x: Any) -> bool:
        return isinstance(x, str)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def __eq__(self, other: object) -> bool:  # vector envs check that every env has equal spaces
        return isinstance(other, AnyText)

    __hash__ = spaces.Space.__hash__


class EchoTextEnv(gym.Env):
    """Dict observation with a free-text part; the action is text that is echoed back."""

    def __init__(self) -> None:
        self.observation_space = spaces.Dict({"text": AnyText(), "step": spaces.Discrete(100)})
        self.action_space = AnyText()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.t = 0
        return {"text": "héllo ✓", "step": 0}, {"task_id": "echo"}

    def step(self, action: str):
        self.t += 1
        done = self.t >= 3
        return (
            {"text": f"you said {action}", "step": self.t},
            float(len(action)),
            done,
            False,
            {"task_id": "echo"},
        )


class DelayEnv(gym.Env):
    """A counter env whose step sleeps ``delays[k]`` seconds (per env), to make stragglers."""

    def __init__(self, delay: float = 0.0, die_at: int | None = None, episode: int = 5) -> None:
        self.observation_space = spaces.Box(0, 1000, shape=(1,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self.delay = delay
        self.die_at = die_at
        self.episode = episode
        self.total_steps = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {"pid": os.getpid()}

    def step(self, action: int):
        time.sleep(self.delay)
        self.t += 1
        self.total_steps += 1
        if self.die_at is not None and self.total_steps == self.die_at:
            os._exit(3)  # a hard crash of the worker process (no exception, no cleanup)
        done = self.t >= self.episode
        return np.array([self.t], np.float32), 1.0, done, False, {"pid": os.getpid()}


class SleepWorker:
    """A rollout worker whose rollouts take ``rollout_s`` (longer for higher indices when skewed)."""

    def __init__(self, index: int, rollout_s: float = 0.02, skew: float = 0.0) -> None:
        self.index = index
        self.rollout_s = rollout_s * (1.0 + skew * index)
        self.weights: dict[str, int] | None = None

    def set_weights(self, weights: dict[str, int]) -> None:
        self.weights = weights

    def rollout(self, seed: int) -> dict[str, int]:
        time.sleep(self.rollout_s)
        assert self.weights is not None, "rollout before any weights"
        return {"seed": seed, "weights_version": self.weights["version"], "worker": self.index}


class VersionLearner:
    """Counts updates; its weights carry their own version so tests can check what workers used."""

    def __init__(self, train_s: float = 0.01) -> None:
        self.version = 0
        self.train_s = train_s
        self.seen: list[tuple[int, int]] = []  # (step, weights version the rollout was made with)
        self.on_update: Any = None  # called with the step number (fault injection in tests)

    def get_weights(self) -> dict[str, int]:
        return {"version": self.version}

    def update(self, batch: list[dict[str, int]]) -> dict[str, float]:
        time.sleep(self.train_s)
        self.seen += [(self.version, r["weights_version"]) for r in batch]
        self.version += 1
        if self.on_update is not None:
            self.on_update(self.version)
        return {"batch": float(len(batch))}


def make_sleep_worker(index: int) -> SleepWorker:
    return SleepWorker(index, rollout_s=0.02, skew=0.5)


class BuggyWorker(SleepWorker):
    """Raises in its rollout: a bug in user code must stop the run with the traceback."""

    def rollout(self, seed: int) -> dict[str, int]:
        raise ValueError("bug in my rollout code")


def make_buggy_worker(index: int) -> BuggyWorker:
    return BuggyWorker(index)


def make_dying_worker(index: int) -> SleepWorker:
    os._exit(7)  # dies while being built, every time: a crash loop


# --- envs for the conformance suite (tests/wrappers/echo/test_echo_conformance.py) ------------
class CountEnv(gym.Env):
    """Gymnasium's autoreset test env: obs counts steps from the reset seed; reward = action."""

    def __init__(self, max_count: int = 3) -> None:
        self.observation_space = spaces.Discrete(50)
        self.action_space = spaces.Discrete(5)
        self.max_count = max_count
        self.count = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.count = seed if seed is not None else 0
        return self.count, {"reset_seed": -1 if seed is None else seed}

    def step(self, action: int):
        self.count += 1
        return self.count, float(action), self.count >= self.max_count, False, {"count": self.count}


class SpaceEnv(gym.Env):
    """Observations sampled from ``space`` (seeded by reset); episodes of 3 steps; echoes actions."""

    def __init__(
        self, space: spaces.Space, action_space: spaces.Space | None = None, render_mode: str = "rgb_array"
    ):
        self.observation_space = space
        self.action_space = action_space if action_space is not None else spaces.Discrete(2)
        self.render_mode = render_mode
        self.t = 0
        self.current_options: dict[str, Any] | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self.observation_space.seed(seed)
        self.t = 0
        self.current_options = options
        return self.observation_space.sample(), {}

    def step(self, action: Any):
        self.t += 1
        return self.observation_space.sample(), float(self.t), False, self.t >= 3, {}

    def render(self):
        return np.full((4, 4, 3), self.t, dtype=np.uint8)

    @staticmethod
    def custom_method(dim_0: int = 1, dim_1: int = 1) -> np.ndarray:
        return np.ones((dim_0, dim_1))


class StepEnv(gym.Env):
    """SB3's terminal-observation env: obs is the previous step count; truncates at ``max_steps``."""

    def __init__(self, max_steps: int) -> None:
        self.action_space = spaces.Discrete(2)
        self.observation_space = spaces.Box(np.array([0]), np.array([999]), dtype=np.int64)
        self.max_steps = max_steps
        self.current_step = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.current_step = 0
        return np.array([self.current_step]), {}

    def step(self, action: int):
        prev = self.current_step
        self.current_step += 1
        return np.array([prev]), 0.0, False, self.current_step >= self.max_steps, {}


class SlowEnv(gym.Env):
    """Gymnasium's slow env: reset sleeps ``slow_reset`` s, step sleeps ``action`` s."""

    def __init__(self, slow_reset: float = 0.0) -> None:
        self.observation_space = spaces.Box(0, 255, shape=(8, 8, 3), dtype=np.uint8)
        self.action_space = spaces.Box(0.0, 1e4, shape=(), dtype=np.float32)
        self.slow_reset = slow_reset

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        time.sleep(self.slow_reset)
        return self.observation_space.sample(), {}

    def step(self, action: Any):
        time.sleep(float(action))
        return self.observation_space.sample(), 0.0, False, False, {}


class FaultEnv(gym.Env):
    """Counts steps; misbehaves on request so the fault tests can inject every kind of failure.

    Actions: 0 step, 1 raise in step, 2 hang in step, 3 kill the process in step. With
    ``reset_fails_after`` the reset after that many resets raises (a failing autoreset).
    """

    def __init__(
        self, episode: int = 100, reset_fails_after: int | None = None, reset_raises: bool = False
    ) -> None:
        self.observation_space = spaces.Box(0, 1000, shape=(1,), dtype=np.float32)
        self.action_space = spaces.Discrete(4)
        self.episode = episode
        self.reset_fails_after = reset_fails_after
        self.reset_raises = reset_raises
        self.resets = 0
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if self.reset_raises:
            raise RuntimeError("reset always fails")
        if self.reset_fails_after is not None and self.resets >= self.reset_fails_after:
            raise RuntimeError("reset failed after the episode ended")
        self.resets += 1
        self.t = 0
        return np.zeros(1, np.float32), {"pid": os.getpid()}

    def step(self, action: int):
        if action == 1:
            raise ValueError(f"env step failed at t={self.t}")
        if action == 2:
            time.sleep(3600)
        if action == 3:
            os._exit(5)
        self.t += 1
        return np.array([self.t], np.float32), 1.0, self.t >= self.episode, False, {"pid": os.getpid()}


class WideText(spaces.Text):
    """A ``Text`` subclass whose ``contains`` accepts characters outside its charset."""

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        return "✓ " + super().sample()

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length + 2


class HelperProcessEnv(FaultEnv):
    """A FaultEnv that starts a helper process (like a browser or a chain node) and never stops it."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        import subprocess

        if not hasattr(self, "helper"):
            self.helper = subprocess.Popen(["sleep", "300"])
        obs, info = super().reset(seed=seed, options=options)
        return obs, {**info, "helper_pid": self.helper.pid}


class FlakyResetEnv(FaultEnv):
    """The first reset ever (across processes, marked by a file) fails; later ones work."""

    def __init__(self, marker: str) -> None:
        super().__init__()
        self.marker = marker

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        # O_EXCL: exactly one process creates the marker, even when two workers reset at once (an
        # exists-then-create check let both fail under load).
        try:
            fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            pass
        else:
            os.close(fd)
            raise RuntimeError("first reset fails")
        obs, info = super().reset(seed=seed, options=options)
        return obs + (seed or 0), {**info, "seed": seed}
