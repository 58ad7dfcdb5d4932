"""Baseline routers for ``Lynn/Coordination-v0``: round-robin, static rule, epsilon-greedy, linear Thompson.

All read the same observation as :class:`lynn.agents.linucb.LinUCBAgent` (candidate features and the
``action_mask``) and the learners use the same delayed-feedback bookkeeping, so the comparison is
about the decision rule only. Numpy only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from lynn.agents import Agent
from lynn.agents.linucb import SIM, DelayedUpdates, Ridge, candidates, parse_args


class RoundRobinAgent(Agent):
    """Routes to the available slots in turn (a load-balancer with no notion of skill)."""

    name = "round-robin"

    def __init__(self, env: gym.Env, **kwargs: Any) -> None:
        super().__init__(env, **kwargs)
        self.next = 0

    def reset(self, seed: int | None = None) -> None:
        self.next = 0

    def act(self, obs: dict[str, np.ndarray], info: dict[str, Any]) -> int:
        idx = candidates(obs)
        n = len(obs["candidates"])
        # The first available slot at or after the pointer, cyclically.
        order = (idx - self.next) % n
        slot = int(idx[int(np.argmin(order))])
        self.next = (slot + 1) % n
        return slot


class StaticRuleAgent(Agent):
    """Always the available worker with the best advertised match for the subtask (no learning).

    This is the reference's static rule (the cheap specialist for simple work, the strongest for hard
    work, read off the capability table); it skips unavailable workers but never updates.
    """

    name = "static"

    def act(self, obs: dict[str, np.ndarray], info: dict[str, Any]) -> int:
        idx = candidates(obs)
        sim = np.asarray(obs["candidates"])[idx, SIM]
        return int(idx[int(np.argmax(sim))])


@dataclass
class LinearArgs:
    """Arguments of the shared-theta linear baselines.

    Attributes:
        lam: ridge regulariser.
        epsilon: exploration rate of epsilon-greedy.
        decay: epsilon-greedy explores with ``epsilon / (1 + decay * updates)`` (0 = constant).
        v: posterior scale of linear Thompson sampling.
    """

    lam: float = 1.0
    epsilon: float = 0.1
    decay: float = 0.0
    v: float = 0.3


class _SharedLinear(Agent):
    """Shared ridge model over the candidate features, updated on delayed feedback."""

    def __init__(self, env: gym.Env, **kwargs: Any) -> None:
        super().__init__(env)
        self.args = parse_args(LinearArgs, kwargs)
        self.d = env.observation_space["candidates"].shape[1]
        self.scale = 1.0 / math.sqrt(self.d)
        self.reset()

    def reset(self, seed: int | None = None) -> None:
        self.rng = np.random.default_rng(seed)
        self.model = Ridge(self.d, self.args.lam)
        self.delayed = DelayedUpdates()

    def _choose(self, idx: np.ndarray, xs: np.ndarray) -> int:
        """Index into ``idx`` of the chosen candidate: greedy on the ridge estimate."""
        return int(np.argmax(xs @ self.model.theta[0]))

    def act(self, obs: dict[str, np.ndarray], info: dict[str, Any]) -> int:
        idx = candidates(obs)
        xs = np.asarray(obs["candidates"], dtype=np.float64)[idx] * self.scale
        k = self._choose(idx, xs)
        self.delayed.chose(int(idx[k]), xs[k])
        return int(idx[k])

    def observe(
        self,
        action: Any,
        reward: float,
        next_obs: Any,
        terminated: bool,
        truncated: bool,
        info: dict[str, Any],
    ) -> None:
        for _, x, r in self.delayed.settle(reward, info):
            self.model.update(0, x, r)


class EpsilonGreedyAgent(_SharedLinear):
    """Greedy on the shared ridge estimate; a uniformly random available worker with probability epsilon."""

    name = "epsilon-greedy"

    def _choose(self, idx: np.ndarray, xs: np.ndarray) -> int:
        a = self.args
        eps = a.epsilon / (1.0 + a.decay * float(self.model.n[0]))
        if self.rng.random() < eps:
            return int(self.rng.integers(idx.size))
        return super()._choose(idx, xs)


class ThompsonAgent(_SharedLinear):
    """Linear Thompson sampling: ``theta ~ N(theta_hat, v^2 A^-1)`` each decision, then greedy."""

    name = "thompson"

    def _choose(self, idx: np.ndarray, xs: np.ndarray) -> int:
        cov = self.model.A_inv[0]
        try:
            chol = np.linalg.cholesky(cov)
        except np.linalg.LinAlgError:  # round-off can make A^-1 slightly indefinite after many updates
            chol = np.linalg.cholesky(cov + 1e-9 * np.eye(self.d))
        theta = self.model.theta[0] + self.args.v * chol @ self.rng.standard_normal(self.d)
        return int(np.argmax(xs @ theta))


class OracleRouter(Agent):
    """Privileged: the worker with the highest hidden expected success now (the regret reference)."""

    name = "oracle"

    def act(self, obs: dict[str, np.ndarray], info: dict[str, Any]) -> int:
        assert self.env is not None
        return int(self.env.unwrapped.oracle_action())
