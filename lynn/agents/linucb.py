"""The Symphony-Coord router: stage-1 screening + stage-2 shared-theta LinUCB with delayed updates.

One readable file (CleanRL style). Per decision:

1. **Screening** keeps the top-``top_l`` available candidates by the reference score
   ``0.5*similarity + 0.35*prior_success + 0.15*stability`` with
   ``stability = 0.4*(1-load) + 0.4*(1-latency_norm) + 0.2*available``.
2. **LinUCB** scores each kept candidate's feature vector ``x`` (``[1, sim, load, lat, prior, avail]``
   brought to ``||x|| <= 1``) by ``x.theta + beta_t * sqrt(x' A^-1 x)`` with one shared ``theta`` and the
   OFUL radius ``beta_t = alpha * sqrt(d ln(1 + t/lambda) + 2 ln(1/delta)) + sqrt(lambda) * S``, ``t`` the
   updates so far with ``t = max(1, t)`` (the reference's ``GlobalLinUCB.beta``). Two feature maps:
   ``features="reference"`` is Symphony-Coord's ``build_x``: each vector divided by its own norm when
   that exceeds 1 (always, since ``x[0] = 1``); ``features="scaled"`` (ours, the default) multiplies
   every vector by the constant ``1/sqrt(d)``, which keeps the raw features' relative sizes across
   candidates (a candidate with more of everything is not shrunk towards the others).
3. **Delayed updates**: the chosen ``x`` waits under the env's ``info["decision_id"]`` until the
   vote's reward arrives in ``info["feedback"]``; then ``A^-1`` (Sherman-Morrison) and ``b`` update.

Variants (flags of :class:`LinUCBArgs`): ``disjoint`` (one model per pool slot), ``screening=False``
(all available candidates go to stage 2), ``freeze_after`` (stop learning after that many updates),
``change_detect`` (a per-worker CUSUM change detector, :class:`ChangeDetector`: a worker whose settled
outcomes fall far below what its record predicted is left out of the candidates for a while).

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
FEATURE_MAPS = ("scaled", "reference")


@dataclass
class LinUCBArgs:
    """Arguments of the router.

    ``lam``, ``delta``, ``top_l`` are the reference's. Its ``alpha=1, S=1`` make the OFUL radius a
    worst-case bound that explores several times more than needed on every Lynn scenario (regret
    2-8x higher, BENCHMARKS.md "Coordination"); the defaults here, ``alpha=0.05, S=0.5``, were
    chosen on those measurements, with ``features="scaled"``. Pass ``alpha=1, S=1,
    features="reference"`` for the reference's router (``tests/agents/test_linucb_params.py`` checks it
    decision by decision against one written from Symphony-Coord's ``GlobalLinUCB`` and ``build_x``).

    Attributes:
        alpha: exploration scale of the OFUL radius.
        features: ``"scaled"`` (``x / sqrt(d)``, ours) or ``"reference"`` (``build_x``: ``x / ||x||``
            when ``||x|| > 1``).
        lam: ridge regulariser lambda (``A = lam*I + sum x x'``).
        delta: confidence level of the radius.
        S: bound on ``||theta*||``.
        top_l: candidates kept by stage-1 screening.
        screening: run stage 1 (``False``: every available candidate goes to LinUCB).
        disjoint: one LinUCB model per pool slot instead of the shared ``theta``.
        freeze_after: stop updating (the model and the change detector) after this many updates
            (warm-up then frozen); ``None`` never.
        change_detect: run a per-worker CUSUM test (:class:`ChangeDetector`) on the settled outcomes
            and leave a worker that trips it out of the candidates for ``suspend_for`` decisions.
        cusum_rho: the change the test looks for: the worker's success rate falls to ``cusum_rho``
            times what the router's own record of it on that subtask class predicted.
        cusum_h: the CUSUM threshold (log-likelihood ratio); the in-control run length between false
            alarms on one worker is at least ``exp(cusum_h)`` of its calls (Lorden's bound, for a
            known pre-change rate; the router's record is an estimate of it).
        suspend_for: decisions a flagged worker stays out of the candidates (doubled at each further
            alarm); then it is readmitted on probation and LinUCB decides on it again.
        min_record: calls of a (worker, subtask class) record before the test uses its outcomes.
    """

    alpha: float = 0.05
    features: str = "scaled"
    lam: float = 1.0
    delta: float = 0.05
    S: float = 0.5
    top_l: int = 3
    screening: bool = True
    disjoint: bool = False
    freeze_after: int | None = None
    change_detect: bool = True
    cusum_rho: float = 0.1
    cusum_h: float = 7.0
    suspend_for: int = 50
    min_record: int = 10

    def __post_init__(self) -> None:
        if self.features not in FEATURE_MAPS:
            raise ValueError(f"features must be one of {FEATURE_MAPS}, got {self.features!r}")
        if not 0.0 < self.cusum_rho < 1.0:
            raise ValueError(f"cusum_rho must lie in (0, 1), got {self.cusum_rho!r}")
        if self.cusum_h <= 0.0:
            raise ValueError(f"cusum_h must be > 0, got {self.cusum_h!r}")
        if self.min_record < 0:
            raise ValueError(f"min_record must be >= 0, got {self.min_record!r}")
        if self.suspend_for < 0:
            raise ValueError(f"suspend_for must be >= 0, got {self.suspend_for!r}")


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


class ChangeDetector:
    """Per-worker one-sided Bernoulli CUSUM (Page 1954) on settled outcomes: "has this worker broken?".

    Each settled decision on worker ``i`` is a success or a failure (settled reward >= 0.5: in every
    Lynn scenario the reward is the vote's 0/1 success plus penalties and bonuses smaller than 0.5).
    Its expected success ``p0`` is the router's own record of that worker on that subtask class
    (``(successes + 1) / (calls + 2)`` over the outcomes it has seen), and the test only runs once that
    record holds ``min_record`` calls: a long good record that suddenly fails is the signal, a
    worker the router barely knows is LinUCB's business. The test is ``H0: p = p0`` against
    ``H1: p = rho * p0``, the log-likelihood ratio summed as ``S_i = max(0, S_i + llr)``: a success
    adds ``log(rho)``, a failure ``log((1 - rho p0) / (1 - p0))``. When ``S_i >= h`` the worker is
    flagged: it leaves the candidates for ``suspend_for`` decisions (the restart of CUSUM-UCB / M-UCB,
    Liu et al. 2018, Cao et al. 2019, for a shared-theta model: the change is the worker's, not
    theta's), then comes back on probation, like a circuit breaker's half-open state: a success on its
    first call back clears it, a failure flags it again at once; every alarm suspends the worker for
    twice as long as the one before (exponential backoff, never reset within an episode: one lucky
    probe of a degraded worker does not buy it a short suspension next time), so a dead worker
    costs one probe per doubling period and a false alarm one suspension.
    Its record and statistic are kept across an alarm (``S_i`` restarts at 0). Outcomes that settle
    while the worker is suspended (calls made before the alarm, delayed feedback) join its record but
    not the statistic: they are evidence of the change the alarm already acted on, and counting them
    again would raise a second alarm and double the suspension for one break.

    With the defaults ``rho = 0.1, h = 7`` (Lorden's bound for a known ``p0``: at least ``e^7`` ~ 1100
    calls of a worker between false alarms, more than one 1000-step episode) a worker whose record is
    >= 0.975 is flagged after two failures in a row, one at 0.95 after three, at 0.9 after four; a
    success pulls the statistic down by 2.3. The defaults were chosen on the stationary, shock,
    drift, churn, load-burst and latency scenarios (seeds 100-104; BENCHMARKS.md "Coordination over
    real agents"), where they move LinUCB's regret by -8 to +3 (within the seeds' spread);
    ``change_detect=False`` is the plain router.

    Args:
        n_slots: pool slots.
        rho: post-change success ratio ``p1 / p0``.
        h: alarm threshold.
        suspend_for: decisions a flagged worker is left out.
        min_record: calls of the (worker, class) record before its outcomes are tested.
    """

    def __init__(self, n_slots: int, rho: float, h: float, suspend_for: int, min_record: int) -> None:
        self.rho, self.h, self.suspend_for, self.min_record = rho, h, suspend_for, min_record
        self.log_rho = math.log(rho)
        self.stat = np.zeros(n_slots)
        self.record: dict[tuple[int, bytes], list[int]] = {}  # (slot, class) -> [successes, calls]
        self.until = np.zeros(n_slots, dtype=np.int64)  # decision count until which a slot is out
        self.strikes = np.zeros(n_slots, dtype=np.int64)  # alarms so far (the backoff's exponent)
        self.probation = np.zeros(n_slots, dtype=bool)  # readmitted, its next outcome decides
        self.t = 0
        self.alarms: list[tuple[int, int]] = []  # (decision count, slot), for logs and tests

    def suspended(self) -> np.ndarray:
        """Boolean mask of the slots left out now."""
        return self.until > self.t

    def tick(self) -> None:
        """One decision made."""
        self.t += 1

    def update(self, slot: int, cls: bytes, success: bool) -> bool:
        """Add one settled outcome of ``slot`` on subtask class ``cls``; return whether it alarmed."""
        rec = self.record.setdefault((slot, cls), [0, 0])
        if self.suspended()[slot]:
            # A call made before the alarm, settling now: the alarm already acted on this change, so
            # the outcome joins the record but neither the statistic nor a second alarm.
            rec[0] += int(success)
            rec[1] += 1
            return False
        if self.probation[slot]:
            # Half-open: the first outcome after readmission closes the breaker or reopens it, longer.
            self.probation[slot] = False
            rec[0] += int(success)
            rec[1] += 1
            return False if success else self._alarm(slot)
        if rec[1] >= self.min_record:
            p0 = (rec[0] + 1.0) / (rec[1] + 2.0)
            llr = self.log_rho if success else math.log((1.0 - self.rho * p0) / (1.0 - p0))
            self.stat[slot] = max(0.0, self.stat[slot] + llr)
        rec[0] += int(success)
        rec[1] += 1
        if self.stat[slot] < self.h:
            return False
        return self._alarm(slot)

    def _alarm(self, slot: int) -> bool:
        self.stat[slot] = 0.0
        self.until[slot] = self.t + self.suspend_for * 2 ** int(min(self.strikes[slot], 16))
        self.strikes[slot] += 1
        self.probation[slot] = True
        self.alarms.append((self.t, slot))
        return True


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
        self._classes = DelayedUpdates()
        self.detector = (
            ChangeDetector(self.n_slots, a.cusum_rho, a.cusum_h, a.suspend_for, a.min_record)
            if a.change_detect
            else None
        )

    def beta(self, t: np.ndarray | int) -> np.ndarray | float:
        """The OFUL radius after ``t`` updates (``t`` an int, or an array of per-model counts).

        ``t`` is taken as ``max(1, t)``, as the reference's ``GlobalLinUCB.beta`` does.
        """
        a = self.args
        if isinstance(t, int):
            t = max(1, t)
            return (
                a.alpha * math.sqrt(self.d * math.log1p(t / a.lam) + self._log_delta) + math.sqrt(a.lam) * a.S
            )
        return (
            a.alpha * np.sqrt(self.d * np.log1p(np.maximum(np.asarray(t), 1) / a.lam) + self._log_delta)
            + math.sqrt(a.lam) * a.S
        )

    def features(self, x: np.ndarray) -> np.ndarray:
        """The LinUCB feature vectors of raw candidate rows ``x`` (``features`` option)."""
        if self.args.features == "reference":  # build_x: divide by the norm where it exceeds 1
            norm = np.linalg.norm(x, axis=-1, keepdims=True)
            return np.where(norm > 1.0, x / np.where(norm > 0, norm, 1.0), x)
        return x * self.scale

    def act(self, obs: dict[str, np.ndarray], info: dict[str, Any]) -> int:
        x_all = np.asarray(obs["candidates"], dtype=np.float64)
        idx = candidates(obs)
        if self.detector is not None:
            self.detector.tick()
            keep = idx[~self.detector.suspended()[idx]]
            idx = keep if keep.size else idx  # every candidate flagged: LinUCB chooses among them all
        if self.args.screening and idx.size > self.args.top_l:
            scores = screening_scores(x_all[idx])
            idx = idx[np.argsort(-scores, kind="stable")[: self.args.top_l]]
        xs = self.features(x_all[idx])
        if self.args.disjoint:
            mean, width = self.model.mean_and_width(idx, xs)
            ucb = mean + self.beta(self.model.n[idx]) * width
        else:  # the hot path: one shared model, plain matrix products
            width = np.sqrt(np.maximum(((xs @ self.model.A_inv[0]) * xs).sum(axis=1), 0.0))
            ucb = xs @ self.model.theta[0] + self.beta(int(self.model.n[0])) * width
        best = int(np.argmax(ucb))
        self.delayed.chose(int(idx[best]), xs[best])
        if self.detector is not None:  # the subtask class travels to the outcome on its own queue
            self._classes.chose(int(idx[best]), np.asarray(obs.get("subtask", ())).tobytes())
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
        frozen = self.args.freeze_after is not None and self.updates >= self.args.freeze_after
        if self.detector is not None:  # frozen: the detector stops learning too
            for slot, cls, r in self._classes.settle(reward, info):
                if not frozen:
                    self.detector.update(slot, cls, r >= 0.5)
        for slot, x, r in self.delayed.settle(reward, info):
            if self.args.freeze_after is not None and self.updates >= self.args.freeze_after:
                continue
            self.model.update(slot if self.args.disjoint else 0, x, r)
            self.updates += 1

    def config(self) -> dict[str, Any]:
        """The arguments, for logs."""
        return asdict(self.args)
