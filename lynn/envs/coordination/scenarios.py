"""Scenarios of ``Lynn/Coordination-v0``: who is in the pool, what the stream looks like, what changes.

Each scenario is a dataclass (its fields are the knobs; override any of them with
``gym.make("Lynn/Coordination-v0", scenario="drift", scenario_kwargs={"sigma": 0.02})``). A scenario

* builds the pool (:meth:`Scenario.populate`; the base class is in
  :mod:`~lynn.envs.coordination.scenario_base`),
* samples the subtask stream (:meth:`Scenario.sample_subtask`),
* applies its events before each step (:meth:`Scenario.on_step`: shocks, bursts, churn, drift),

and all randomness comes from the env's ``np_random``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, ClassVar

import numpy as np

from lynn.envs.coordination.pool import AgentPool, AgentProfile, PoolDynamics, Subtask
from lynn.envs.coordination.real_pool import RealPool
from lynn.envs.coordination.scenario_base import Scenario

__all__ = [
    "SCENARIOS",
    "Churn",
    "Drift",
    "LatencyHeterogeneity",
    "LoadBurst",
    "Scenario",
    "Stationary",
    "StandbyShock",
    "SymphonyShock",
    "make_scenario",
]


# --- stationary -------------------------------------------------------------------------------
#: Specialists B, C, D (one per type), generalist A, and E who advertises 0.97 on code and math but is weak.
STATIONARY_TABLE: tuple[AgentProfile, ...] = (
    AgentProfile("A-generalist", 1.00, 900.0, 0.85, 0.60, (0.80, 0.80, 0.80), (0.90, 0.90, 0.90)),
    AgentProfile("B-coder", 0.30, 400.0, 0.97, 0.85, (0.95, 0.30, 0.30), (1.00, 0.40, 0.50)),
    AgentProfile("C-math", 0.35, 500.0, 0.97, 0.85, (0.30, 0.95, 0.30), (0.45, 1.00, 0.40)),
    AgentProfile("D-writer", 0.10, 300.0, 0.97, 0.85, (0.30, 0.30, 0.90), (0.50, 0.40, 1.00)),
    AgentProfile("E-overclaimer", 0.20, 350.0, 0.90, 0.50, (0.97, 0.97, 0.50), (0.35, 0.35, 0.60)),
)


@dataclass
class Stationary(Scenario):
    """Three subtask types, three specialists, a generalist and an over-advertised worker; nothing changes.

    The best worker depends on the subtask type (and difficulty), the advertised capability is a
    useful but imperfect hint (worker ``E`` claims 0.97 on code and math and succeeds ~30% of the time), and
    the pool's reputation never forgets (``reputation_decay=1``), so a learning router converges.
    Load is mild: a specialist called for every subtask of its type does not overload.
    """

    name: ClassVar[str] = "stationary"
    description: ClassVar[str] = "3 types, 3 specialists + generalist + over-advertised worker; no change"

    type_names: tuple[str, ...] = ("code", "math", "writing")
    p_hard: float = 0.3
    dynamics: PoolDynamics = field(
        default_factory=lambda: PoolDynamics(load_per_call=0.10, reputation_decay=1.0)
    )

    agents: tuple[AgentProfile, ...] = STATIONARY_TABLE


# --- symphony-shock ---------------------------------------------------------------------------
#: The five-worker table of the Symphony-Coord simulation (cost, latency, p_simple, p_hard, match).
SYMPHONY_TABLE: tuple[AgentProfile, ...] = (
    AgentProfile("A", 1.00, 900.0, 0.99, 0.99, (0.80, 0.95)),
    AgentProfile("B", 0.10, 350.0, 0.88, 0.18, (0.95, 0.20)),
    AgentProfile("C", 0.35, 550.0, 0.92, 0.65, (0.75, 0.75)),
    AgentProfile("D", 0.22, 420.0, 0.90, 0.45, (0.85, 0.55)),
    AgentProfile("E", 0.60, 780.0, 0.95, 0.85, (0.60, 0.90)),
)

# The reference's collateral damage on the other workers: {worker: (p_simple, p_hard) multipliers}.
_COLLATERAL: dict[str, dict[str, tuple[float, float]]] = {
    "unavailable": {"E": (1.0, 0.30), "C": (1.0, 0.50), "D": (1.0, 0.60)},
    "degraded": {"E": (1.0, 0.40), "C": (1.0, 0.60)},
    "offline": {"E": (1.0, 0.30), "C": (1.0, 0.50), "D": (1.0, 0.60)},
}


@dataclass
class SymphonyShock(Scenario):
    """The reference's 5-worker pool (A strong and expensive ... B cheap and weak on hard work) with a shock.

    Subtask types are ``simple`` and ``hard`` (half of each, the reference's balanced setting: with
    its 70%-hard variant, losing A leaves so little capacity that even the oracle never gets back to
    90% of its pre-shock success); the capability is the reference's match score. At step ``shock_step`` the best worker ``A`` is hit, silently (its card does not change):

    * ``shock="degraded"``: A's success falls to 0.6x on simple and 0.2x on hard subtasks;
    * ``shock="unavailable"``: A stops answering: it still shows as available (its heartbeat is
      stale) but every call to it times out and fails;
    * ``shock="offline"``: A goes down visibly (``available`` = 0, the action mask excludes it).

    ``collateral=True`` adds the reference's damage to the other workers (E, C, and for
    ``unavailable`` D, get worse on hard work, and A's advertised hard match drops to 0.7x). The
    pool then loses so much capacity that no router can return to 90% of its pre-shock success
    (the reference reports the same), so by default only A is hit and recovery is possible.

    Load follows the reference (+0.30 per call, x0.88 per step, unavailable at 0.95), so even A
    alone cannot take every subtask, and the reputation forgets (EMA 0.95) so that a router can see
    the shock.
    """

    name: ClassVar[str] = "symphony-shock"
    description: ClassVar[str] = "the reference 5-agent pool; the best agent silently degrades halfway"

    type_names: tuple[str, ...] = ("simple", "hard")
    p_hard: float = 0.5
    dynamics: PoolDynamics = field(default_factory=lambda: PoolDynamics(reputation_decay=0.95))
    agents: tuple[AgentProfile, ...] = SYMPHONY_TABLE
    shock: str = "degraded"
    shock_step: int = 500
    collateral: bool = False

    def __post_init__(self) -> None:
        if self.shock not in _COLLATERAL:
            raise ValueError(f"shock must be one of {sorted(_COLLATERAL)}, got {self.shock!r}")

    def sample_subtask(self, t: int, rng: np.random.Generator) -> Subtask:
        hard = bool(rng.random() < self.p_hard)
        return self._subtask(int(hard), hard)

    @property
    def shock_at(self) -> int | None:
        return self.shock_step

    def on_step(self, t: int, pool: AgentPool, rng: np.random.Generator) -> list[str]:
        if t != self.shock_step:
            return []
        names = pool.names()
        a = names.index("A")
        if self.shock == "unavailable":
            pool.failed[a] = True
        elif self.shock == "offline":
            pool.offline[a] = True
        else:
            pool.p_simple[a] *= 0.6
            pool.p_hard[a] *= 0.2
        if self.collateral:
            for who, (f_simple, f_hard) in _COLLATERAL[self.shock].items():
                i = names.index(who)
                pool.p_simple[i] *= f_simple
                pool.p_hard[i] *= f_hard
            if self.shock == "degraded":
                pool.capability[a, 1] *= 0.7
        return [f"shock: A {self.shock}" + (" (+ collateral)" if self.collateral else "")]


@dataclass
class SymphonyShockUnavailable(SymphonyShock):
    """:class:`SymphonyShock` with ``shock="unavailable"`` (the best worker drops out halfway)."""

    name: ClassVar[str] = "symphony-shock-unavailable"
    description: ClassVar[str] = "the reference 5-agent pool; the best agent silently stops answering halfway"
    shock: str = "unavailable"


# --- standby-shock ---------------------------------------------------------------------------
#: The reference pool plus ``S``, a near-equal standby for ``A`` (a little slower and pricier, a little
#: weaker on hard work) that a router only needs when ``A`` is busy.
STANDBY_TABLE: tuple[AgentProfile, ...] = (
    *SYMPHONY_TABLE,
    AgentProfile("S-standby", 1.10, 950.0, 0.98, 0.96, (0.80, 0.93)),
)


@dataclass
class StandbyShock(SymphonyShock):
    """A shock the pool can absorb: the reference pool plus a near-equal standby ``S`` for ``A``.

    In :class:`SymphonyShock` losing ``A`` costs the pool so much capacity that even the oracle needs
    ~97 steps to get back to 0.9x its pre-shock success; here ``S`` (0.98 / 0.96 against ``A``'s
    0.99 / 0.99, cost 1.10 against 1.00) can take ``A``'s work, and the load is milder (+0.15 per
    call, so ``A`` and ``S`` together absorb most hard subtasks), so the oracle's post-shock success
    (0.93) stays above 0.9x its pre-shock one (0.96) and it "recovers" at once. A learning router
    must first notice: ``A`` fails silently at ``shock_step`` (``shock="unavailable"``, the default:
    its calls time out while it still looks available), degrades (``"degraded"``), or goes visibly
    down (``"offline"``: its heartbeat stops, ``available`` turns 0, which every router survives).

    The reputation forgets fast (EMA 0.8 per execution, ~5 executions of memory, against the
    reference's 0.95): with a 20-execution memory the ``prior_success`` of ``A`` stays high for the
    8-10 failed calls it takes to drop it, and those failures alone keep the rolling-50 success
    under the target for 50 steps whatever the router does next (measured: LinUCB 60-80 steps).
    """

    name: ClassVar[str] = "standby-shock"
    description: ClassVar[str] = "reference pool + a near-equal standby for A; A silently fails halfway"

    dynamics: PoolDynamics = field(
        default_factory=lambda: PoolDynamics(load_per_call=0.15, reputation_decay=0.8)
    )
    agents: tuple[AgentProfile, ...] = STANDBY_TABLE
    shock: str = "unavailable"


# --- latency-heterogeneity --------------------------------------------------------------------
@dataclass
class LatencyHeterogeneity(Scenario):
    """Workers of similar skill whose latencies span 150 ms to 2.6 s, with a 2 s timeout.

    A call that takes longer than ``timeout_ms`` fails, and latency grows with load, so the slow,
    skilled workers are only worth it while they are cool; ``latency_norm`` carries the signal.
    """

    name: ClassVar[str] = "latency-heterogeneity"
    description: ClassVar[str] = "similar skills, latencies 150 ms-2.6 s, calls over 2 s time out"

    type_names: tuple[str, ...] = ("general",)
    p_hard: float = 0.5
    dynamics: PoolDynamics = field(
        default_factory=lambda: PoolDynamics(load_per_call=0.15, timeout_ms=2000.0, reputation_decay=0.99)
    )

    agents: tuple[AgentProfile, ...] = (
        AgentProfile("fast-small", 0.05, 150.0, 0.85, 0.45, (0.6,)),
        AgentProfile("fast-mid", 0.15, 300.0, 0.90, 0.60, (0.7,)),
        AgentProfile("mid", 0.30, 800.0, 0.93, 0.72, (0.8,)),
        AgentProfile("slow-large", 0.70, 1500.0, 0.98, 0.88, (0.9,)),
        AgentProfile("slowest-xl", 1.00, 1900.0, 0.99, 0.95, (0.95,)),
        AgentProfile("flaky", 0.20, 2600.0, 0.95, 0.80, (0.85,)),
    )


# --- load-burst -------------------------------------------------------------------------------
@dataclass
class LoadBurst(Scenario):
    """The stationary pool under bursts: every ``period`` steps, ``burst_len`` hard subtasks of one type.

    During a burst the type's specialist overloads (calls raise load by ``load_per_call``) and the
    router must spill over to the next-best available worker.
    """

    name: ClassVar[str] = "load-burst"
    description: ClassVar[str] = "stationary pool; periodic bursts of one hard type overload its specialist"

    type_names: tuple[str, ...] = ("code", "math", "writing")
    p_hard: float = 0.3
    dynamics: PoolDynamics = field(
        default_factory=lambda: PoolDynamics(load_per_call=0.30, load_penalty=0.3, reputation_decay=0.99)
    )
    period: int = 200
    burst_len: int = 60

    agents: tuple[AgentProfile, ...] = STATIONARY_TABLE

    def sample_subtask(self, t: int, rng: np.random.Generator) -> Subtask:
        phase = t % self.period
        if phase >= self.period - self.burst_len:
            k = (t // self.period) % self.n_types
            return self._subtask(k, True)
        return super().sample_subtask(t, rng)


# --- churn ------------------------------------------------------------------------------------
@dataclass
class Churn(Scenario):
    """Eight slots, five of them filled with the stationary pool; workers leave and new ones join.

    Each step every present worker leaves with probability ``leave_prob`` (never below ``min_present``)
    and every empty slot fills with a newly drawn worker with probability ``join_prob``. A new
    worker's skill is its advertised capability plus noise, so the router must try newcomers.
    """

    name: ClassVar[str] = "churn"
    description: ClassVar[str] = "8 slots; workers leave and join with fresh, partly misleading cards"

    type_names: tuple[str, ...] = ("code", "math", "writing")
    p_hard: float = 0.3
    dynamics: PoolDynamics = field(
        default_factory=lambda: PoolDynamics(load_per_call=0.15, reputation_decay=0.99)
    )
    slots: int = 8
    leave_prob: float = 0.004
    join_prob: float = 0.01
    min_present: int = 3
    agents: tuple[AgentProfile, ...] = STATIONARY_TABLE
    _serial: int = field(default=0, init=False, repr=False)

    @property
    def n_slots(self) -> int:
        return self.slots

    def populate(self, pool: AgentPool, rng: np.random.Generator) -> None:
        if len(self.agents) > self.slots:
            raise ValueError(f"churn: {len(self.agents)} starting agents do not fit in {self.slots} slots")
        self._serial = 0
        super().populate(pool, rng)

    def _draw(self, rng: np.random.Generator) -> AgentProfile:
        self._serial += 1
        cap = rng.uniform(0.2, 1.0, self.n_types)
        skill = np.clip(cap + rng.normal(0.0, 0.2, self.n_types), 0.1, 1.0)
        p_simple = float(rng.uniform(0.85, 0.99))
        return AgentProfile(
            name=f"W{self._serial}",
            cost=round(float(rng.uniform(0.05, 1.0)), 2),
            base_latency_ms=float(rng.uniform(200.0, 1200.0)),
            p_simple=p_simple,
            p_hard=p_simple * float(rng.uniform(0.4, 0.95)),
            capability=tuple(float(c) for c in cap),
            skill=tuple(float(s) for s in skill),
        )

    def on_step(self, t: int, pool: AgentPool, rng: np.random.Generator) -> list[str]:
        events = []
        leave = rng.random(self.slots) < self.leave_prob
        join = rng.random(self.slots) < self.join_prob
        for slot in range(self.slots):
            if pool.present[slot] and leave[slot] and pool.present.sum() > self.min_present:
                events.append(f"leave: {pool.names()[slot]} (slot {slot})")
                pool.remove_agent(slot)
            elif not pool.present[slot] and join[slot]:
                pool.set_agent(slot, self._draw(rng))
                events.append(f"join: {pool.names()[slot]} (slot {slot})")
        return events


# --- drift ------------------------------------------------------------------------------------
@dataclass
class Drift(Scenario):
    """The stationary pool whose hidden skills drift slowly (a mean-reverting random walk).

    Every step each skill moves by ``sigma`` noise and reverts to its starting value at rate
    ``reversion``; the reputation forgets (``reputation_decay=0.98``) so it can follow.
    """

    name: ClassVar[str] = "drift"
    description: ClassVar[str] = "stationary pool; hidden skills drift slowly (mean-reverting walk)"

    type_names: tuple[str, ...] = ("code", "math", "writing")
    p_hard: float = 0.3
    dynamics: PoolDynamics = field(
        default_factory=lambda: PoolDynamics(load_per_call=0.10, reputation_decay=0.98)
    )
    sigma: float = 0.02
    reversion: float = 0.002
    _start: np.ndarray | None = field(default=None, init=False, repr=False)

    agents: tuple[AgentProfile, ...] = STATIONARY_TABLE

    def populate(self, pool: AgentPool, rng: np.random.Generator) -> None:
        super().populate(pool, rng)
        self._start = pool.skill.copy()

    def on_step(self, t: int, pool: AgentPool, rng: np.random.Generator) -> list[str]:
        assert self._start is not None
        noise = rng.normal(0.0, self.sigma, pool.skill.shape)
        pool.skill += self.reversion * (self._start - pool.skill) + noise
        np.clip(pool.skill, 0.05, 1.0, out=pool.skill)
        return []


SCENARIOS: dict[str, type[Scenario]] = {
    cls.name: cls
    for cls in (
        Stationary,
        SymphonyShock,
        SymphonyShockUnavailable,
        StandbyShock,
        LatencyHeterogeneity,
        LoadBurst,
        Churn,
        Drift,
    )
}


#: Scenarios over real workers (not in SCENARIOS, whose every entry is simulated and cheap enough
#: for check_env and the task list: a real pool builds its task list when constructed).
REAL_SCENARIOS: dict[str, type[Scenario]] = {RealPool.name: RealPool}


def make_scenario(scenario: str | Scenario, overrides: dict[str, Any] | None = None) -> Scenario:
    """The scenario called ``scenario`` (or a copy of the given instance) with ``overrides`` applied.

    ``overrides`` name the scenario's init fields and its :class:`PoolDynamics` fields. The scenario
    is constructed once, with its overrides (a real pool builds its task list in ``__init__``); the
    dynamics overrides then replace its ``dynamics``.

    Raises:
        ValueError: for an unknown scenario name or field.
    """
    if isinstance(scenario, Scenario):
        cls: type[Scenario] = type(scenario)

        def build(**kw: Any) -> Scenario:
            return replace(scenario, **kw)

    elif scenario in SCENARIOS or scenario in REAL_SCENARIOS:
        cls = build = SCENARIOS.get(scenario) or REAL_SCENARIOS[scenario]
    else:
        raise ValueError(
            f"unknown scenario {scenario!r}; choose one of {', '.join([*SCENARIOS, *REAL_SCENARIOS])}"
        )
    overrides = dict(overrides or {})
    dyn_names = {f.name for f in fields(PoolDynamics)}
    dyn_over = {k: overrides.pop(k) for k in list(overrides) if k in dyn_names}
    known = {f.name for f in fields(cls) if f.init}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(
            f"scenario {cls.name!r} has no field(s) {unknown}; fields: {sorted(known | dyn_names)}"
        )
    out = build(**overrides)
    if dyn_over:
        out.dynamics = replace(out.dynamics, **dyn_over)
    return out
