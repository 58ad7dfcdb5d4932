"""The Symphony-Coord router: stage-1 screening + stage-2 shared-theta LinUCB with delayed updates.

One readable file (CleanRL style). Per decision:

1. **Screening** keeps the top-``top_l`` available candidates by the reference score
   ``0.5*similarity + 0.35*prior_success + 0.15*stability`` with
   ``stability = 0.4*(1-load) + 0.4*(1-latency_norm) + 0.2*available``.
2. **LinUCB** scores each kept candidate's feature vector ``x`` (``[1, sim, load, lat, prior, avail]``
   scaled to ``||x|| <= 1``) by ``x.theta + beta_t * sqrt(x' A^-1 x)`` with one shared ``theta`` and the
   OFUL radius ``beta_t = alpha * sqrt(d ln(1 + t/lambda) + 2 ln(1/delta)) + sqrt(lambda) * S``.
3. **Delayed updates**: the chosen ``x`` waits under the env's ``info["decision_id"]`` until the
   vote's reward arrives in ``info["feedback"]``; then ``A^-1`` (Sherman-Morrison) and ``b`` update.

Variants (flags of :class:`LinUCBArgs`): ``disjoint`` (one model per pool slot), ``screening=False``
(all available candidates go to stage 2), ``freeze_after`` (stop learning after that many updates).

Example:
    >>> import gymnasium as gym, lynn
    >>> from lynn.agents.linucb import LinUCBAgent
    >>> env = gym.make("Lynn/Coordination-v0", scenario="symphony-shock")
    >>> agent = LinUCBAgent(env)
    >>> obs, info = env.reset(seed=0); agent.reset(seed=0)
    >>> for _ in range(100):
    ...     action = agent.act(obs, info)
    ...     obs, reward, terminated, truncated, info = env.step(action)
    ...     agent.observe(action, reward, obs, terminated, truncated, info)
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any

import gymnasium as gym
import numpy as np

from lynn.agents import Agent

# Column indices of the candidate features (lynn.envs.coordination.pool.FEATURES).
SIM, LOAD, LAT, PRIOR, AVAIL = 1, 2, 3, 4, 5


@dataclass
class LinUCBArgs:
    """Arguments of the router.

    ``lam``, ``delta``, ``top_l`` are the reference's. Its ``alpha=1, S=1`` make the OFUL radius a
    worst-case bound that explores several times more than needed on every Lynn scenario (regret
    2-8x higher, BENCHMARKS.md "Coordination"); the defaults here, ``alpha=0.05, S=0.5``, were
    chosen on those measurements. Pass ``alpha=1, S=1`` for the reference's router.

    Attributes:
        alpha: exploration scale of the OFUL radius.
        lam: ridge regulariser lambda (``A = lam*I + sum x x'``).
        delta: confidence level of the radius.
        S: bound on ``||theta*||``.
        top_l: candidates kept by stage-1 screening.
        screening: run stage 1 (``False``: every available candidate goes to LinUCB).
        disjoint: one LinUCB model per pool slot instead of the shared ``theta``.
        freeze_after: stop updating after this many updates (warm-up then frozen); ``None`` never.
    """

    alpha: float = 0.05
    lam: float = 1.0
    delta: float = 0.05
    S: float = 0.5
    top_l: int = 3
    screening: bool = True
    disjoint: bool = False
    freeze_after: int | None = None


def parse_args(cls: type, kwargs: dict[str, Any]) -> Any:
    """Build dataclass ``cls`` from agent kwargs, with a helpful error for unknown names."""
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(kwargs) - names)
    if unknown:
        raise TypeError(f"unknown option(s) {unknown}; {cls.__name__} takes {sorted(names)}")
    return cls(**kwargs)


# The reference's stage-1 score is linear in the features: with stability = 0.4(1-load) +
# 0.4(1-latency_norm) + 0.2*available, 0.5*sim + 0.35*prior + 0.15*stability expands to these weights
# on [1, sim, load, latency_norm, prior, available] (one matrix-vector product per decision).
SCREEN_WEIGHTS = np.array([0.15 * 0.8, 0.5, -0.15 * 0.4, -0.15 * 0.4, 0.35, 0.15 * 0.2])


def screening_scores(x: np.ndarray) -> np.ndarray:
    """The reference's stage-1 score of each candidate row of ``x`` (raw features, bias column 1).

    ``0.5*similarity + 0.35*prior_success + 0.15*stability`` with
    ``stability = 0.4*(1-load) + 0.4*(1-latency_norm) + 0.2*available``.
    """
    return x @ SCREEN_WEIGHTS


def candidates(obs: dict[str, np.ndarray]) -> np.ndarray:
    """Indices of the slots the env lets us route to (all slots if the obs has no mask)."""
    mask = obs.get("action_mask")
    if mask is None:
        return np.arange(len(obs["candidates"]))
    idx = np.flatnonzero(np.asarray(mask))
    return idx if idx.size else np.arange(len(mask))  # nothing available: any choice is lost anyway


class Ridge:
    """Ridge regression kept as ``A^-1`` and ``b`` (Sherman-Morrison rank-one updates).

    Args:
        d: feature dimension.
        lam: regulariser.
        n_models: independent models stacked (1 = shared theta; N = one per slot).
    """

    def __init__(self, d: int, lam: float, n_models: int = 1) -> None:
        self.d, self.lam = d, lam
        self.A_inv = np.tile(np.eye(d) / lam, (n_models, 1, 1))
        self.b = np.zeros((n_models, d))
        self.theta = np.zeros((n_models, d))
        self.n = np.zeros(n_models, dtype=np.int64)

    def update(self, m: int, x: np.ndarray, r: float) -> None:
        """Add observation ``(x, r)`` to model ``m``."""
        a_inv = self.A_inv[m]
        ax = a_inv @ x
        a_inv -= np.outer(ax, ax) / (1.0 + x @ ax)
        self.b[m] += r * x
        self.theta[m] = a_inv @ self.b[m]
        self.n[m] += 1

    def mean_and_width(self, m: np.ndarray, xs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``x.theta`` and ``sqrt(x' A^-1 x)`` for rows ``xs`` under models ``m`` (one per row)."""
        mean = np.einsum("ij,ij->i", xs, self.theta[m])
        width = np.sqrt(np.maximum(np.einsum("ij,ijk,ik->i", xs, self.A_inv[m], xs), 0.0))
        return mean, width


class DelayedUpdates:
    """Matches settled rewards (``info["feedback"]``) to the decisions that earned them.

    ``act`` stores the chosen ``(slot, x)``; ``observe`` files it under the env's ``decision_id`` and
    returns every ``(slot, x, reward)`` whose reward arrived this step. With an env that reports no
    decision ids, each reward is applied to the decision just made.
    """

    def __init__(self) -> None:
        self.last: tuple[int, np.ndarray] | None = None
        self.pending: dict[int, tuple[int, np.ndarray]] = {}

    def reset(self) -> None:
        self.last = None
        self.pending.clear()

    def chose(self, slot: int, x: np.ndarray) -> None:
        self.last = (slot, x)

    def settle(self, reward: float, info: dict[str, Any]) -> list[tuple[int, np.ndarray, float]]:
        if "feedback" not in info:
            out = [(*self.last, float(reward))] if self.last is not None else []
            self.last = None
            return out
        if self.last is not None and info.get("decision_id") is not None:
            self.pending[int(info["decision_id"])] = self.last
        self.last = None
        out = []
        for decision_id, r in info["feedback"]:
            item = self.pending.pop(int(decision_id), None)
            if item is not None:
                out.append((*item, float(r)))
        return out


class LinUCBAgent(Agent):
    """Two-stage Symphony-Coord router (see the module docstring); kwargs are :class:`LinUCBArgs`."""

    name = "linucb"

    def __init__(self, env: gym.Env, **kwargs: Any) -> None:
        super().__init__(env)
        self.args = parse_args(LinUCBArgs, kwargs)
        cand = env.observation_space["candidates"]
        self.n_slots, self.d = cand.shape
        self.scale = 1.0 / math.sqrt(self.d)  # all features lie in [0, 1]: this makes ||x|| <= 1
        self.reset()

    def reset(self, seed: int | None = None) -> None:
        a = self.args
        self.model = Ridge(self.d, a.lam, self.n_slots if a.disjoint else 1)
        self.delayed = DelayedUpdates()
        self.updates = 0
        self._log_delta = 2.0 * math.log(1.0 / a.delta)

    def beta(self, t: np.ndarray | int) -> np.ndarray | float:
        """The OFUL radius after ``t`` updates (``t`` an int, or an array of per-model counts)."""
        a = self.args
        if isinstance(t, int):
            return (
                a.alpha * math.sqrt(self.d * math.log1p(t / a.lam) + self._log_delta) + math.sqrt(a.lam) * a.S
            )
        return (
            a.alpha * np.sqrt(self.d * np.log1p(np.asarray(t) / a.lam) + self._log_delta)
            + math.sqrt(a.lam) * a.S
        )

    def act(self, obs: dict[str, np.ndarray], info: dict[str, Any]) -> int:
        x_all = np.asarray(obs["candidates"], dtype=np.float64)
        idx = candidates(obs)
        if self.args.screening and idx.size > self.args.top_l:
            scores = screening_scores(x_all[idx])
            idx = idx[np.argsort(-scores, kind="stable")[: self.args.top_l]]
        xs = x_all[idx] * self.scale
        if self.args.disjoint:
            mean, width = self.model.mean_and_width(idx, xs)
            ucb = mean + self.beta(self.model.n[idx]) * width
        else:  # the hot path: one shared model, plain matrix products
            width = np.sqrt(np.maximum(((xs @ self.model.A_inv[0]) * xs).sum(axis=1), 0.0))
            ucb = xs @ self.model.theta[0] + self.beta(int(self.model.n[0])) * width
        best = int(np.argmax(ucb))
        self.delayed.chose(int(idx[best]), xs[best])
        return int(idx[best])

    def observe(
        self,
        action: Any,
        reward: float,
        next_obs: Any,
        terminated: bool,
        truncated: bool,
        info: dict[str, Any],
    ) -> None:
        for slot, x, r in self.delayed.settle(reward, info):
            if self.args.freeze_after is not None and self.updates >= self.args.freeze_after:
                continue
            self.model.update(slot if self.args.disjoint else 0, x, r)
            self.updates += 1

    def config(self) -> dict[str, Any]:
        """The arguments, for logs."""
        return asdict(self.args)
