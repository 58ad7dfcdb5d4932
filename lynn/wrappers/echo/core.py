"""The actor-learner's decision logic, free of processes and clocks, plus a discrete-event simulator.

:class:`Coordinator` decides which worker gets a rollout request at which policy version, which
buffered rollouts the learner may consume (bounded staleness) and when the learner publishes.
The real runner (:mod:`lynn.wrappers.echo.actor_learner`) drives it from threads with real worker
processes or Ray actors; :func:`simulate` drives the *same* object with a simulated clock, which is
what the property tests use to explore many worker speeds and crash schedules quickly.

Versions and staleness: the learner's weights after ``t`` updates are version ``t``. The update
that turns version ``t`` into ``t + 1`` is "learner step ``t``"; a rollout generated with version
``x`` and consumed at step ``t`` has staleness ``t - x``. In ``push_pull`` mode a rollout is
consumed only if ``t - x <= S`` and dropped (counted) otherwise; in ``pull`` mode every rollout is
requested at the current version and consumed at staleness 0 (on-policy).
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MODES", "Coordinator", "EchoStats", "Rollout", "SimWorker", "simulate"]

MODES = ("pull", "push_pull")


@dataclass
class Rollout:
    """One trajectory (or batch of them) produced by a worker with policy ``version``."""

    rollout_id: int
    worker: int
    version: int
    data: Any = None
    steps: int = 0


@dataclass
class EchoStats:
    """What a run did. ``utilisation`` is the learner's busy fraction from its first update to its last."""

    mode: str
    backend: str
    updates: int = 0
    wall_s: float = 0.0
    learner_busy_s: float = 0.0
    utilisation: float = 0.0
    utilisation_total: float = 0.0
    rollouts_dispatched: int = 0
    rollouts_generated: int = 0
    rollouts_consumed: int = 0
    rollouts_per_s: float = 0.0
    dropped_stale: int = 0
    lost: int = 0
    refused: int = 0
    abandoned: int = 0
    leftover: int = 0
    worker_restarts: int = 0
    publishes: int = 0
    broadcast: str = "direct"
    learner_sent_bytes: int = 0
    weight_wait_s: float = 0.0
    staleness_hist: dict[int, int] = field(default_factory=dict)
    metrics: list[dict[str, float]] = field(default_factory=list)

    def summary(self) -> str:
        """One line for logs."""
        hist = " ".join(f"{k}:{v}" for k, v in sorted(self.staleness_hist.items()))
        return (
            f"{self.mode}/{self.backend}: {self.updates} updates in {self.wall_s:.2f}s, "
            f"utilisation {self.utilisation:.1%}, {self.rollouts_per_s:.1f} rollouts/s, "
            f"consumed {self.rollouts_consumed}, dropped stale {self.dropped_stale}, lost {self.lost}, "
            f"refused {self.refused}, "
            f"restarts {self.worker_restarts}, staleness [{hist}]"
        )


class Coordinator:
    """Request dispatch, the replay buffer with bounded staleness, and the publication schedule.

    Args:
        mode: ``pull`` (on-policy: requests only at the current version, exactly ``R`` per update)
            or ``push_pull`` (every idle worker always gets a request at the newest published
            version; the learner consumes rollouts with staleness ``<= S``).
        rollouts_per_update: ``R``, rollouts consumed by one learner update.
        staleness: ``S``, the largest staleness a consumed rollout may have (``push_pull``).
        kappa: ``κ``, the learner publishes its weights every ``κ`` updates (``push_pull``;
            ``pull`` publishes after every update). Needs ``1 <= κ <= S + 1``: a rollout made
            right after a publication is already ``κ - 1`` steps old when the next one happens.
        order: which consumable rollouts go first: ``freshest`` (newest version first; the default,
            it keeps staleness low when workers out-produce the learner) or ``fifo``.
    """

    def __init__(
        self, mode: str, rollouts_per_update: int, staleness: int = 0, kappa: int = 1, order: str = "freshest"
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if rollouts_per_update < 1:
            raise ValueError("rollouts_per_update must be at least 1")
        if mode == "pull":
            staleness, kappa = 0, 1
        if staleness < 0:
            raise ValueError("staleness must be >= 0")
        if not 1 <= kappa <= staleness + 1:
            raise ValueError(
                f"kappa must be in [1, staleness + 1] = [1, {staleness + 1}], got {kappa}: with a longer "
                "publication period every rollout would be stale before the next publication"
            )
        if order not in ("freshest", "fifo"):
            raise ValueError(f"order must be 'freshest' or 'fifo', got {order!r}")
        self.order = order
        self.mode = mode
        self.R = rollouts_per_update
        self.S = staleness
        self.kappa = kappa
        self.t = 0  # learner step (updates done)
        self.published_version = 0
        self.buffer: list[Rollout] = []
        self.in_flight: dict[int, tuple[int, int]] = {}  # worker -> (rollout_id, version)
        self._ids = itertools.count()
        self.dispatched = 0
        self.generated = 0
        self.arrivals: dict[int, int] = {}  # worker -> rollouts arrived (consumed or not): its mu_i
        self.dropped_stale = 0
        self.lost = 0
        self.refused = 0
        self.consumed_ids: set[int] = set()
        self.consumed: list[tuple[int, int, int]] = []  # (rollout_id, version, step)
        self.staleness_hist: Counter[int] = Counter()
        self.publishes = 0
        self.closed = False
        self.step_requested = 0  # requests issued at the current published version

    def close(self) -> None:
        """Stop issuing requests (the run is over; requests in flight may still arrive)."""
        self.closed = True

    def requests(self, idle_workers: Sequence[int]) -> list[tuple[int, int, int]]:
        """Requests to send now: ``(worker, rollout_id, version)`` for some of ``idle_workers``."""
        if self.closed:
            return []
        idle = [w for w in idle_workers if w not in self.in_flight]
        if self.mode == "pull":
            if self.published_version != self.t:
                return []  # the learner has not published the weights of this step yet
            # Exactly R requests per version (re-issued if a worker dies), so none go to waste.
            idle = idle[: max(0, self.R - self.step_requested)]
        out = []
        for w in idle:
            rid = next(self._ids)
            self.in_flight[w] = (rid, self.published_version)
            out.append((w, rid, self.published_version))
        self.dispatched += len(out)
        self.step_requested += len(out)
        return out

    def arrived(self, worker: int, rollout: Rollout) -> None:
        """A worker finished its request; the rollout enters the buffer."""
        self.in_flight.pop(worker, None)
        self.generated += 1
        self.arrivals[worker] = self.arrivals.get(worker, 0) + 1
        self.buffer.append(rollout)

    def worker_lost(self, worker: int) -> int:
        """A worker died; its request in flight (if any) is lost. Returns how many were lost."""
        lost = self.in_flight.pop(worker, None)
        if lost is None:
            return 0
        if lost[1] == self.published_version:
            self.step_requested -= 1  # pull mode asks again for the lost one
        self.lost += 1
        return 1

    def refuse(self, worker: int) -> None:
        """A worker returned a malformed rollout: it never enters the buffer (pull mode asks again)."""
        got = self.in_flight.pop(worker, None)
        if got is not None and got[1] == self.published_version:
            self.step_requested -= 1
        self.generated += 1
        self.refused += 1

    def drop_stale(self) -> int:
        """Drop buffered rollouts too old for the current step; return how many."""
        fresh = [r for r in self.buffer if self.t - r.version <= self.S]
        n = len(self.buffer) - len(fresh)
        self.buffer = fresh
        self.dropped_stale += n
        return n

    def take(self) -> list[Rollout] | None:
        """The next ``R`` consumable rollouts (removed from the buffer, see ``order``), or None."""
        self.drop_stale()
        if len(self.buffer) < self.R:
            return None
        if self.order == "freshest":
            # Newest versions first (stable within a version): with more supply than demand the
            # surplus ages out instead of pushing the whole queue towards the staleness bound.
            self.buffer.sort(key=lambda r: -r.version)
        batch, self.buffer = self.buffer[: self.R], self.buffer[self.R :]
        for r in batch:
            if r.rollout_id in self.consumed_ids:  # an invariant, checked because it is cheap
                raise AssertionError(f"rollout {r.rollout_id} consumed twice")
            self.consumed_ids.add(r.rollout_id)
            self.consumed.append((r.rollout_id, r.version, self.t))
            self.staleness_hist[self.t - r.version] += 1
        return batch

    def updated(self) -> bool:
        """The learner finished step ``t``; True when it must publish version ``t + 1`` now."""
        self.t += 1
        return self.t % self.kappa == 0

    def published(self, version: int) -> None:
        """Workers may now be sent ``version``."""
        self.published_version = version
        self.publishes += 1
        self.step_requested = 0

    def fill(self, stats: EchoStats) -> EchoStats:
        """Copy the counters into ``stats``."""
        stats.updates = self.t
        stats.rollouts_dispatched = self.dispatched
        stats.rollouts_generated = self.generated
        stats.rollouts_consumed = len(self.consumed)
        stats.dropped_stale = self.dropped_stale
        stats.lost = self.lost
        stats.refused = self.refused
        stats.abandoned = len(self.in_flight)
        stats.leftover = len(self.buffer)
        stats.publishes = self.publishes
        stats.staleness_hist = dict(sorted(self.staleness_hist.items()))
        return stats


# --- discrete-event simulation ----------------------------------------------------------------
@dataclass
class SimWorker:
    """A simulated worker: ``rollout_s`` per rollout (a number or a callable of the rollout index)."""

    rollout_s: float | Callable[[int], float]
    crash_at: Sequence[float] = ()
    restart_s: float = 0.0

    def duration(self, k: int) -> float:
        return float(self.rollout_s(k) if callable(self.rollout_s) else self.rollout_s)


def simulate(
    mode: str,
    workers: Sequence[SimWorker],
    *,
    rollouts_per_update: int,
    updates: int,
    staleness: int = 0,
    kappa: int = 1,
    train_s: float = 1.0,
    bcast_s: float = 0.0,
    max_time: float = 1e9,
    order: str = "freshest",
) -> tuple[EchoStats, Coordinator]:
    """Run :class:`Coordinator` against simulated workers and a simulated learner.

    The model is the one the capacity rule assumes: an update takes ``train_s``; a worker that is
    sent a version newer than the one it holds first spends ``bcast_s`` receiving it, then
    ``rollout_s`` generating; publication itself is instant. A worker crashes at each of its
    ``crash_at`` times (its request in flight is lost) and is back ``restart_s`` later.

    Returns:
        The run's stats and the coordinator (for its consumption record).
    """
    coord = Coordinator(mode, rollouts_per_update, staleness, kappa, order)
    stats = EchoStats(mode=mode, backend="sim")
    events: list[tuple[float, int, str, int, Any]] = []
    seq = itertools.count()

    def push(time: float, kind: str, worker: int = -1, payload: Any = None) -> None:
        heapq.heappush(events, (time, next(seq), kind, worker, payload))

    held = [-1] * len(workers)  # version each worker holds
    made = [0] * len(workers)
    alive = [True] * len(workers)
    epoch = [0] * len(workers)  # bumps on crash so stale completions are ignored
    for w, spec in enumerate(workers):
        for c in spec.crash_at:
            push(float(c), "crash", w)
    now = 0.0
    learner_busy_until: float | None = None
    first_update: float | None = None
    busy = 0.0

    def dispatch() -> None:
        idle = [w for w in range(len(workers)) if alive[w]]
        for w, rid, version in coord.requests(idle):
            delay = (bcast_s if held[w] != version else 0.0) + workers[w].duration(made[w])
            held[w] = version
            made[w] += 1
            push(now + delay, "done", w, (rid, version, epoch[w]))

    def learner_try() -> None:
        nonlocal learner_busy_until, first_update, busy
        if learner_busy_until is not None or coord.t >= updates:
            return
        batch = coord.take()
        if batch is None:
            return
        if first_update is None:
            first_update = now
        learner_busy_until = now + train_s
        busy += train_s
        push(learner_busy_until, "trained")

    dispatch()
    while events and coord.t < updates:
        now, _, kind, w, payload = heapq.heappop(events)
        if now > max_time:
            break
        if kind == "done":
            rid, version, ep = payload
            if ep != epoch[w] or not alive[w]:
                continue  # the worker crashed while making it
            coord.arrived(w, Rollout(rid, w, version))
        elif kind == "crash":
            if alive[w]:
                alive[w] = False
                epoch[w] += 1
                coord.worker_lost(w)
                stats.worker_restarts += 1
                held[w] = -1
                push(now + workers[w].restart_s, "restart", w)
        elif kind == "restart":
            alive[w] = True
        elif kind == "trained":
            learner_busy_until = None
            if coord.updated():
                coord.published(coord.t)
        learner_try()
        dispatch()
        learner_try()
    stats.wall_s = now
    stats.learner_busy_s = busy
    if first_update is not None and now > first_update:
        stats.utilisation = busy / (now - first_update)
    stats.utilisation_total = busy / now if now > 0 else 0.0
    coord.fill(stats)
    stats.rollouts_per_s = coord.generated / now if now > 0 else 0.0
    return stats, coord
