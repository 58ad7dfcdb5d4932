"""The simulated agent pool behind ``Lynn/Coordination-v0``.

A pool holds ``N`` slots of LLM workers. Each present worker has a static card (:class:`AgentProfile`:
cost, base latency, success on simple/hard subtasks, advertised capability per subtask type, hidden
skill per type) and a dynamic state kept in numpy arrays so that one step costs a few microseconds:

* **load** rises by ``load_per_call`` per call and decays by ``load_decay`` every step; a worker whose
  load reaches ``overload`` is unavailable until it cools down (the Symphony-Coord simulation).
* **latency** is an EMA of sampled call latencies; calls slow down under load.
* **record** (the ``prior_success`` feature) is the pool's reputation of a worker on one subtask class
  (type x difficulty): a Beta posterior mean over its past executions, seeded with the worker's
  advertised match (worth ``prior_strength`` executions) and optionally discounted so that it forgets
  (the reference keeps a 0.95 EMA). It is the router's only window on the hidden skill.

The hidden success probability of worker ``i`` on a subtask of type ``k`` and difficulty ``h`` is
``(p_simple_i if h == 0 else p_hard_i) * skill_ik * (1 - load_penalty * load_i)``; an execution whose
latency exceeds ``timeout_ms`` (if set) fails as well.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

#: Candidate feature columns, in order (the LinUCB context of the reference).
FEATURES: tuple[str, ...] = ("bias", "similarity", "load", "latency_norm", "prior_success", "available")
N_FEATURES = len(FEATURES)


@dataclass
class AgentProfile:
    """The static card of one worker.

    Attributes:
        name: display name (``A``..``E`` in the reference table).
        cost: price of one call (arbitrary units; the reference's 0.10-1.00).
        base_latency_ms: mean latency of a call at zero load.
        p_simple: success probability on a simple subtask of a type it is fully skilled at.
        p_hard: success probability on a hard subtask of a type it is fully skilled at.
        capability: advertised match score per subtask type, in [0, 1] (the ``similarity`` feature).
        skill: hidden per-type multiplier of the success probability, in [0, 1]; defaults to all ones.
    """

    name: str
    cost: float
    base_latency_ms: float
    p_simple: float
    p_hard: float
    capability: tuple[float, ...]
    skill: tuple[float, ...] | None = None

    def skill_vector(self, n_types: int) -> np.ndarray:
        """The hidden skill as an array of ``n_types`` values (types the card does not cover: 0)."""
        k = len(self.capability)
        skill = np.ones(k) if self.skill is None else np.asarray(self.skill, dtype=float)
        if skill.shape != (k,) or k > n_types:
            raise ValueError(
                f"agent {self.name}: capability and skill need one value per subtask type ({n_types})"
            )
        return np.pad(skill, (0, n_types - k))


@dataclass(frozen=True)
class Subtask:
    """One unit of work to route.

    Attributes:
        type: subtask type index (e.g. code / math / writing).
        hard: whether it is a hard subtask (uses ``p_hard``).
        requirement: the requirement vector over types (one-hot of ``type``, scaled by difficulty).
    """

    type: int
    hard: bool
    requirement: np.ndarray = field(compare=False, repr=False)


@dataclass
class PoolDynamics:
    """How load, latency and reputation evolve (defaults are the reference simulation's)."""

    load_per_call: float = 0.30
    load_decay: float = 0.88
    overload: float = 0.95
    load_penalty: float = 0.05
    latency_ema: float = 0.20
    latency_load_slowdown: float = 1.2
    latency_noise: float = 0.08
    latency_scale_ms: float = 2000.0
    timeout_ms: float | None = None
    reputation_decay: float = 1.0
    # A new worker's record starts at its advertised match for the subtask type (``None``) or at this
    # fixed value, worth ``prior_strength`` executions.
    prior_mean: float | None = None
    prior_strength: float = 2.0


class AgentPool:
    """Vectorised state of ``n_slots`` worker slots (some may be empty, for churn).

    Args:
        n_slots: number of slots (the env's action space size).
        n_types: number of subtask types.
        dynamics: load/latency/reputation parameters.
    """

    def __init__(self, n_slots: int, n_types: int, dynamics: PoolDynamics) -> None:
        self.n_slots, self.n_types, self.dyn = n_slots, n_types, dynamics
        self.profiles: list[AgentProfile | None] = [None] * n_slots
        self.present = np.zeros(n_slots, dtype=bool)
        self.failed = np.zeros(n_slots, dtype=bool)
        # Down and known to be down (its heartbeat stopped): not available, unlike a silent failure.
        self.offline = np.zeros(n_slots, dtype=bool)
        self.offline_reason: dict[int, str] = {}
        self.cost = np.zeros(n_slots)
        self.base_latency = np.ones(n_slots)
        self.p_simple = np.zeros(n_slots)
        self.p_hard = np.zeros(n_slots)
        self.capability = np.zeros((n_slots, n_types))
        self.skill = np.zeros((n_slots, n_types))
        self.load = np.zeros(n_slots)
        self.latency = np.ones(n_slots)
        # Discounted success / attempt sums per (slot, type, hard): the reputation record.
        self.rec_succ = np.zeros((n_slots, n_types, 2))
        self.rec_n = np.zeros((n_slots, n_types, 2))

    # --- membership ---------------------------------------------------------------------------
    def set_agent(self, slot: int, profile: AgentProfile) -> None:
        """Put ``profile`` in ``slot`` with a fresh state (a new worker joins)."""
        self.profiles[slot] = profile
        self.present[slot] = True
        self.failed[slot] = False
        self.offline[slot] = False
        self.offline_reason.pop(slot, None)
        self.cost[slot] = profile.cost
        self.base_latency[slot] = profile.base_latency_ms
        self.p_simple[slot] = profile.p_simple
        self.p_hard[slot] = profile.p_hard
        self.skill[slot] = profile.skill_vector(self.n_types)
        self.capability[slot] = 0.0
        self.capability[slot, : len(profile.capability)] = profile.capability
        self.load[slot] = 0.0
        self.latency[slot] = profile.base_latency_ms
        self.rec_succ[slot] = 0.0
        self.rec_n[slot] = 0.0

    def remove_agent(self, slot: int) -> None:
        """Empty ``slot`` (the worker leaves the pool)."""
        self.profiles[slot] = None
        self.present[slot] = False
        self.capability[slot] = 0.0
        self.skill[slot] = 0.0
        self.load[slot] = 0.0

    def names(self) -> list[str]:
        """Slot names (``-`` for an empty slot)."""
        return [p.name if p is not None else "-" for p in self.profiles]

    # --- dynamics -----------------------------------------------------------------------------
    def available(self) -> np.ndarray:
        """Slots that can take a call now: present and not overloaded.

        A *failed* worker still shows as available (nobody has noticed yet): its calls time out. An
        *offline* one does not (its heartbeat stopped, so the pool knows).
        """
        return self.present & ~self.offline & (self.load < self.dyn.overload)

    def decay(self) -> None:
        """One step of load cooling."""
        self.load *= self.dyn.load_decay

    def success_prob(self, task: Subtask) -> np.ndarray:
        """Hidden probability that one execution on each slot succeeds (0 for unavailable slots)."""
        base = self.p_hard if task.hard else self.p_simple
        p = base * self.skill[:, task.type] * (1.0 - self.dyn.load_penalty * np.clip(self.load, 0.0, 1.0))
        if self.dyn.timeout_ms is not None:
            p = p * self._p_in_time()
        return np.where(self.available() & ~self.failed, np.clip(p, 0.0, 1.0), 0.0)

    def _latency_mean(self) -> np.ndarray:
        return self.base_latency * (1.0 + self.dyn.latency_load_slowdown * np.clip(self.load, 0.0, 1.0))

    def _p_in_time(self) -> np.ndarray:
        # P(latency <= timeout) for the Gaussian latency model; erf keeps it vectorised and exact.
        from math import erf, sqrt

        mean = self._latency_mean()
        sd = np.maximum(self.dyn.latency_noise * mean, 1e-9)
        z = (self.dyn.timeout_ms - mean) / (sd * sqrt(2.0))
        return 0.5 * (1.0 + np.vectorize(erf)(z))

    def execute(self, slot: int, task: Subtask, n: int, rng: np.random.Generator) -> tuple[np.ndarray, float]:
        """Run ``n`` executions of ``task`` on ``slot``; return (successes as bools, mean latency ms).

        The call raises the slot's load once and feeds its latency EMA; the reputation record is
        updated later, when the vote is settled (:meth:`record`).
        """
        base = self.p_hard[slot] if task.hard else self.p_simple[slot]
        load = min(max(self.load[slot], 0.0), 1.0)
        p = base * self.skill[slot, task.type] * (1.0 - self.dyn.load_penalty * load)
        mean = self.base_latency[slot] * (1.0 + self.dyn.latency_load_slowdown * load)
        lat = np.maximum(10.0, mean + rng.normal(0.0, self.dyn.latency_noise * mean, size=n))
        ok = rng.random(n) < p
        if self.dyn.timeout_ms is not None:
            ok &= lat <= self.dyn.timeout_ms
        if self.failed[slot]:  # a failed worker accepts the call and times out
            ok[:] = False
            lat = lat * 2.0
        a = self.dyn.latency_ema
        self.latency[slot] = (1.0 - a) * self.latency[slot] + a * float(lat.mean())
        self.load[slot] = min(1.0, self.load[slot] + self.dyn.load_per_call)
        return ok, float(lat.mean())

    def record(self, slot: int, task_type: int, hard: bool, successes: int, attempts: int) -> None:
        """Add settled executions to the reputation record of (slot, type, difficulty)."""
        h = int(hard)
        g = self.dyn.reputation_decay
        self.rec_succ[slot, task_type, h] = g**attempts * self.rec_succ[slot, task_type, h] + successes
        self.rec_n[slot, task_type, h] = g**attempts * self.rec_n[slot, task_type, h] + attempts

    def prior_success(self, task: Subtask) -> np.ndarray:
        """The reputation feature of every slot for ``task``'s class."""
        h = int(task.hard)
        d = self.dyn
        succ, n = self.rec_succ[:, task.type, h], self.rec_n[:, task.type, h]
        mean = self.capability[:, task.type] if d.prior_mean is None else d.prior_mean
        return (d.prior_strength * mean + succ) / (d.prior_strength + n)

    def features(self, task: Subtask) -> tuple[np.ndarray, np.ndarray]:
        """Candidate matrix ``(N, 6)`` in :data:`FEATURES` order and the int8 availability mask."""
        avail = self.available()
        req = task.requirement
        sim = self.capability[:, : len(req)] @ req / max(float(np.linalg.norm(req)), 1e-9)
        x = np.empty((self.n_slots, N_FEATURES), dtype=np.float32)
        x[:, 0] = 1.0
        x[:, 1] = np.clip(sim, 0.0, 1.0)
        x[:, 2] = np.clip(self.load, 0.0, 1.0)
        x[:, 3] = np.minimum(1.0, self.latency / self.dyn.latency_scale_ms)
        x[:, 4] = self.prior_success(task)
        x[:, 5] = avail
        x[~self.present] = 0.0  # an empty slot shows nothing
        return x, avail.astype(np.int8)
