r"""Capacity model for the ``push_pull`` actor-learner, and cost-aware worker activation.

Symbols: the learner consumes ``R`` rollouts per update and an update takes ``T_train`` seconds;
it publishes every ``κ`` updates; a worker that receives a new snapshot spends ``T_bcast``
seconds receiving/loading it before it can generate; worker ``i`` generates ``μ_i`` rollouts/s
(one rollout takes ``d_i = 1/μ_i``); ``S`` is the staleness bound.

**Derivation.** Look at one publication window: the ``κ`` updates between two publications.
If the learner never stalls the window lasts ``κ·T_train`` and consumes ``κR`` rollouts. Every
worker spends ``T_bcast`` of the window loading the snapshot and generates during the rest, so the
window produces ``Σμ_i·(κ·T_train − T_bcast)`` rollouts. The learner never stalls iff production
keeps up with consumption::

    Σ μ_i · (κ·T_train − T_bcast) ≥ κ·R      ⇔      Σ μ_i ≥ κR / (κ·T_train − T_bcast)      (1)

(which needs ``κ·T_train > T_bcast``: a snapshot must be disseminated faster than it is replaced).
When (1) fails the learner waits: a window then lasts ``W`` with ``Σμ_i (W − T_bcast) = κR``, of
which it is busy ``κ·T_train``, so the predicted utilisation is::

    U = min(1, κ·T_train / (κR / Σμ_i + T_bcast))                                               (2)

(2) assumes every worker reloads once per window; a worker whose rollout is longer than the window
reloads only once per rollout, which :func:`predicted_utilisation` accounts for when given the
per-worker ``μ_i`` (equation (2'), solved numerically).

Throughput only counts if its rollouts are still fresh when consumed. A rollout tagged with the
version published at the start of a window is consumed at most ``S`` updates later. The last rollout
of that version starts just before the next publication (``κ`` updates later) and the first one of
the *next* version arrives up to ``T_bcast + 2·d_max`` after that publication (the worker may first
finish a rollout of the old version). No version gap opens iff::

    S ≥ κ − 1 + (T_bcast + 2·d_max) / T_train                                                    (3)

so a worker with ``d_i > ((S − κ + 1)·T_train − T_bcast) / 2`` only produces rollouts that risk being
dropped; cost-aware activation leaves such workers off. :func:`cheapest_workers` then switches on
the cheapest set of eligible workers whose ``Σμ_i`` satisfies (1) (a min-cost covering knapsack,
solved exactly by dynamic programming over discretised throughput).

``pull`` mode, for comparison, serialises broadcast, generation and training::

    U_pull = T_train / (T_bcast + makespan(R rollouts over the workers) + T_train)               (4)

**(2) is optimistic at saturation.** It is a fluid model: production is spread evenly over the
window. Rollouts are whole, though, and a publication finds every worker part-way through one of
the old version; where the staleness bound is tight (``S = κ``) that straddling rollout ages out
before it is consumed, and since every worker reloads at the same publication they fall into step,
so the loss does not average out. The simulator then gives less than (2) near the knee: one worker,
``d = 0.1016 s``, ``R = 2``, ``κ = 1``, ``T_bcast = 0.094 s``, ``T_train = 0.3 s``, ``S = 1`` (condition
(3) holds) simulates 0.868 where (2) says 1.0. The missing term is bounded: a worker loses at
most one whole rollout per window besides the load, which gives the pessimistic counterpart of (2')::

    U_lo:  the window W solving  Σ_i μ_i · max(0, W − T_bcast − d_i) = κR,  U_lo = min(1, κT_train/W)   (2-)

(for a worker with ``d_i + T_bcast > W``: ``W/(d_i + T_bcast) − 1`` rollouts). :func:`utilisation_bounds`
returns ``(U_lo, U)``, which coincide away from the knee, where (2) is exact. The simulator lies in
that interval up to the run's start-up and the phase effects neither bound models: of 1,000 random
examples of ``tests/wrappers/echo/test_echo_core.py``'s distribution (condition (3) holding) one lay more
than 0.02 outside it, of 400 more one lay more than 0.04 outside, none further than 0.072 (the test
draws random examples and allows 0.1). Where
condition (3) fails the rule has no answer (stale rollouts are dropped at a rate neither equation
models; the GRPO runs measured 25–50 points below (2) there): :func:`predicted_utilisation` and
:func:`utilisation_bounds` given ``staleness`` return NaN rather than a number.

**Measuring μ_i.** ``μ_i`` is the rate at which worker ``i``'s rollouts *arrive* at the learner
(:func:`arrival_rates`: arrivals in a window ÷ its length), not ``1 / mean duration`` of the groups
the learner consumed: once groups age out the consumed ones are a biased sample (the fast ones),
which overstates what the worker delivers.

``benchmarks/bench_echo_utilisation.py`` compares (2) and (4) with real runs.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "CapacityPlan",
    "WorkerSpec",
    "arrival_rates",
    "freshness_holds",
    "cheapest_workers",
    "max_rollout_seconds",
    "predicted_utilisation",
    "predicted_utilisation_pull",
    "required_throughput",
    "utilisation_bounds",
]


@dataclass(frozen=True)
class WorkerSpec:
    """A worker type: ``throughput`` rollouts/s at ``cost`` per second (any unit)."""

    name: str
    throughput: float
    cost: float = 1.0


@dataclass(frozen=True)
class CapacityPlan:
    """The workers to switch on and what the model predicts for them."""

    workers: tuple[WorkerSpec, ...]
    required_throughput: float
    total_throughput: float
    total_cost: float
    predicted_utilisation: float
    excluded_too_slow: tuple[WorkerSpec, ...] = ()

    @property
    def feasible(self) -> bool:
        return self.total_throughput >= self.required_throughput - 1e-9


def required_throughput(train_s: float, bcast_s: float, rollouts_per_update: int, kappa: int) -> float:
    """Inequality (1): the smallest ``Σμ_i`` (rollouts/s) that keeps the learner busy."""
    window = kappa * train_s - bcast_s
    if window <= 0:
        raise ValueError(
            f"κ·T_train = {kappa * train_s:g}s must exceed T_bcast = {bcast_s:g}s: publish less often "
            "(larger κ) or broadcast faster"
        )
    return kappa * rollouts_per_update / window


def freshness_holds(
    throughput: float | Sequence[float], train_s: float, bcast_s: float, staleness: int, kappa: int
) -> bool:
    """Condition (3) for the slowest of the workers with throughputs ``μ_i``."""
    if isinstance(throughput, int | float):
        raise ValueError("condition (3) needs the per-worker μ_i (a list), not a total")
    mus = [m for m in throughput if m > 0]
    if not mus:
        return True
    return 1.0 / min(mus) <= max_rollout_seconds(train_s, bcast_s, staleness, kappa) + 1e-12


def predicted_utilisation(
    throughput: float | Sequence[float],
    train_s: float,
    bcast_s: float,
    rollouts_per_update: int,
    kappa: int,
    staleness: int | None = None,
) -> float:
    """Equation (2) for a total ``Σμ_i``; equation (2') when given the per-worker ``μ_i`` list.

    (2') refines (2) for workers whose rollout outlasts a publication window: a worker loads a
    snapshot at most once per rollout, so it loses ``T_bcast`` per ``max(W, d_i + T_bcast)``, not
    per window ``W``. The window then solves ``W·Σ_i μ_i^eff(W) = κR`` (bisection), ``U = κT_train/W``.
    It is the optimistic end of :func:`utilisation_bounds` (see the module docstring).

    Args:
        staleness: the bound ``S``; given (with the per-worker ``μ_i``), the rule refuses (returns
            NaN) where condition (3) fails for the slowest worker.
    """
    if staleness is not None and not freshness_holds(throughput, train_s, bcast_s, staleness, kappa):
        return math.nan
    return _window_utilisation(throughput, train_s, bcast_s, rollouts_per_update, kappa, pessimistic=False)


def utilisation_bounds(
    throughput: float | Sequence[float],
    train_s: float,
    bcast_s: float,
    rollouts_per_update: int,
    kappa: int,
    staleness: int | None = None,
) -> tuple[float, float]:
    """``(U_lo, U)``: equation (2-) and equation (2'), the interval the utilisation lies in.

    ``U_lo`` charges every worker one whole rollout per window besides the load (the straddling
    rollout that ages out at a tight staleness bound); ``U`` is the fluid (2'). Given ``staleness``,
    ``(NaN, NaN)`` where condition (3) fails. ``throughput`` must be the per-worker ``μ_i``.
    """
    if isinstance(throughput, int | float):
        raise ValueError("utilisation_bounds needs the per-worker μ_i (a list), not a total")
    if staleness is not None and not freshness_holds(throughput, train_s, bcast_s, staleness, kappa):
        return math.nan, math.nan
    args = (throughput, train_s, bcast_s, rollouts_per_update, kappa)
    return _window_utilisation(*args, pessimistic=True), _window_utilisation(*args, pessimistic=False)


def arrival_rates(arrivals: Sequence[int], span_s: float) -> list[float]:
    """``μ_i`` as the capacity rule needs it: rollouts of worker ``i`` that arrived in a window of
    ``span_s`` seconds, consumed or not, divided by its length."""
    if span_s <= 0:
        raise ValueError(f"span_s must be > 0, got {span_s!r}")
    return [float(a) / span_s for a in arrivals]


def _window_utilisation(
    throughput: float | Sequence[float],
    train_s: float,
    bcast_s: float,
    rollouts_per_update: int,
    kappa: int,
    *,
    pessimistic: bool,
) -> float:
    if isinstance(throughput, int | float) and not pessimistic:
        if throughput <= 0:
            return 0.0
        return min(1.0, kappa * train_s / (kappa * rollouts_per_update / throughput + bcast_s))
    if isinstance(throughput, int | float):
        raise ValueError("the pessimistic bound (2-) needs the per-worker μ_i (a list), not a total")
    mus = [m for m in throughput if m > 0]
    if not mus:
        return 0.0
    need = kappa * rollouts_per_update

    def produced(window: float) -> float:
        total = 0.0
        for mu in mus:
            d = 1.0 / mu
            if d + bcast_s > window:
                total += max(0.0, window / (d + bcast_s) - (1.0 if pessimistic else 0.0))
            else:
                total += (window - bcast_s - (d if pessimistic else 0.0)) / d
        return max(total, 0.0)

    lo = kappa * train_s
    if produced(lo) >= need:
        return 1.0
    hi = lo
    while produced(hi) < need:
        hi *= 2.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if produced(mid) < need else (lo, mid)
    return kappa * train_s / hi


def predicted_utilisation_pull(
    throughputs: Sequence[float], train_s: float, bcast_s: float, rollouts_per_update: int
) -> float:
    """Equation (4): ``pull`` mode; the makespan is greedy list scheduling of ``R`` rollouts."""
    if not throughputs:
        return 0.0
    free = [(0.0, i) for i in range(len(throughputs))]
    heapq.heapify(free)
    makespan = 0.0
    for _ in range(rollouts_per_update):
        t, i = heapq.heappop(free)
        t += 1.0 / throughputs[i]
        makespan = max(makespan, t)
        heapq.heappush(free, (t, i))
    return train_s / (bcast_s + makespan + train_s)


def max_rollout_seconds(train_s: float, bcast_s: float, staleness: int, kappa: int) -> float:
    """Condition (3) solved for ``d_max``: the slowest rollout that cannot open a version gap."""
    return ((staleness - kappa + 1) * train_s - bcast_s) / 2.0


def cheapest_workers(
    candidates: Sequence[WorkerSpec],
    *,
    train_s: float,
    bcast_s: float,
    rollouts_per_update: int,
    kappa: int,
    staleness: int,
    resolution: int = 2000,
) -> CapacityPlan:
    """Cost-aware activation: the cheapest subset of ``candidates`` meeting inequality (1).

    Workers too slow for condition (3) are excluded. If even all eligible workers fall short, the
    plan switches all of them on and reports ``feasible == False`` with the utilisation (2) they give.
    """
    need = required_throughput(train_s, bcast_s, rollouts_per_update, kappa)
    d_max = max_rollout_seconds(train_s, bcast_s, staleness, kappa)
    eligible = [w for w in candidates if w.throughput > 0 and 1.0 / w.throughput <= d_max + 1e-12]
    too_slow = tuple(w for w in candidates if w not in eligible)

    def plan(chosen: Sequence[WorkerSpec]) -> CapacityPlan:
        total = sum(w.throughput for w in chosen)
        return CapacityPlan(
            workers=tuple(chosen),
            required_throughput=need,
            total_throughput=total,
            total_cost=sum(w.cost for w in chosen),
            predicted_utilisation=predicted_utilisation(
                [w.throughput for w in chosen], train_s, bcast_s, rollouts_per_update, kappa
            ),
            excluded_too_slow=too_slow,
        )

    if sum(w.throughput for w in eligible) < need:
        return plan(eligible)
    # Min-cost cover: best[u] = cheapest cost reaching at least u units of throughput (capped at
    # the target). Units round each worker's throughput *down*, so any DP solution truly covers.
    unit = need / resolution
    target = resolution
    inf = math.inf
    best = [inf] * (target + 1)
    choice: list[list[int] | None] = [None] * (target + 1)
    best[0], choice[0] = 0.0, []
    for idx, w in enumerate(eligible):
        units = int(w.throughput / unit)
        for u in range(target, -1, -1):
            if best[u] == inf:
                continue
            v = min(target, u + units)
            cost = best[u] + w.cost
            if cost < best[v] - 1e-12:
                best[v] = cost
                choice[v] = [*choice[u], idx]  # type: ignore[misc]
    if choice[target] is None:  # rounding left a sliver uncovered: fall back to greedy by cost/μ
        chosen: list[WorkerSpec] = []
        for w in sorted(eligible, key=lambda w: w.cost / w.throughput):
            if sum(c.throughput for c in chosen) >= need:
                break
            chosen.append(w)
        return plan(chosen)
    return plan([eligible[i] for i in choice[target]])  # type: ignore[union-attr]
