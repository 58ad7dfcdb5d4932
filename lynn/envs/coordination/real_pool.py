"""The ``real-pool`` scenario of ``Lynn/Coordination-v0``: route real EVMQuest task instances to real workers.

Each subtask is a real atomic EVMQuest task instance (``task_id`` and reset seed), its type the
task's category, or (``liveweb=N``) a real ``Lynn/LiveWeb-v0`` test instance, its type the task's
site/template family (``web:shop.product_price``), mixed with the EVMQuest categories in one stream;
each worker is a real agent behind the :mod:`~lynn.envs.coordination.workers_protocol`
(Lynn's own are built by :func:`lynn.agents.workers.evmquest_pool`, each in its own process). An
execution's success is the task validator's verdict, its latency the measured wall time, its cost the
generated tokens times the worker's price.

* **Cards** (the ``similarity`` feature): every worker runs ``calibration_seeds`` instances of every
  stream task once at the first reset (a short calibration run, cached); its advertised match for a
  category is its smoothed calibration success there, ``(successes + 0.5) / (runs + 1)``. A LiveWeb
  task is one fixed instance (its reset seed draws nothing), so a family's stream instance is its
  first test task and its calibration instance its second (families with one test task are skipped).
* **Stream**: each step a category is drawn uniformly, then one of its instances (``stream_seeds`` x
  ``tasks_per_category`` tasks). Held-out seeds (< 100000) by default.
* **Votes**: ``votes=k`` runs k executions with execution seeds ``0..k-1`` and takes the majority of
  the validator outcomes (deterministic workers answer the same each time, so only samplers and the
  failure-injected oracle differ between votes).
* **Cache**: outcomes per (worker key, instance, execution seed) in ``cache`` (a JSON-lines file):
  a replayed stream runs nothing, and ``exact_regret=True`` (default) fills every available worker's
  outcome on each routed instance, so ``info["regret"]`` is the exact gap to the best available
  worker on that instance (1 - 0, 0 or 0 - 0 on majority votes).
* **Shocks** (``shocks``, reported in ``info["events"]``): ``{"step": t, "kind": "kill", "worker": W}``
  kills W's process (SIGKILL; the pool's heartbeat then marks it offline), ``{"kind": "degrade",
  "worker": W, "to": V}`` silently swaps W's model for worker V's (its card does not change),
  ``{"kind": "join", "worker": V}`` adds V to an empty slot. A worker whose process dies for any
  other reason is detected by the heartbeat at the next step and reported the same way.

* **Default workers** (``workers="lynn.agents.workers:evmquest_pool"``, a string resolved at run time
  like a plug-in's entry point, so this module imports no agent): ``lm-target``, ``lm-sampler`` and
  ``oracle-f30`` over the zoo's EVMQuest LM (``zoo:evm-lm``; ``lm-draft`` and ``lm-mars`` too when the
  zoo has its draft), nothing trained; ``$LYNN_LM_TARGET`` / ``worker_kwargs={"target": PATH}`` (and
  ``draft``) use other models.

The pool keeps the simulated admission model (load +``load_per_call`` per call, decaying; a worker
at ``overload`` refuses calls), because calls here are sequential and a real queue never builds up.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from lynn.envs.coordination.pool import AgentPool, AgentProfile, PoolDynamics, Subtask
from lynn.envs.coordination.scenario_base import Scenario
from lynn.envs.coordination.workers_protocol import (
    Outcome,
    ResultCache,
    TaskRef,
    Worker,
    WorkerDied,
    resolve_factory,
)

EVMQUEST = "Lynn/EVMQuest-v0"
LIVEWEB = "Lynn/LiveWeb-v0"
SHOCK_KINDS = ("kill", "degrade", "join")


@dataclass(frozen=True)
class RealSubtask(Subtask):
    """A subtask that is one real task instance."""

    instance: TaskRef | None = field(default=None, compare=False)


def evmquest_tasks(categories: tuple[str, ...] | None, per_category: int) -> dict[str, list[str]]:
    """The first ``per_category`` atomic EVMQuest tasks (sorted ids) of each category."""
    from lynn.envs.evmquest.evmquest_env import EVMQuestEnv

    by_cat: dict[str, list[str]] = {}
    for t in EVMQuestEnv.list_tasks("atomic"):
        by_cat.setdefault(t["category"], []).append(t["task_id"])
    cats = sorted(by_cat) if categories is None else list(categories)
    unknown = [c for c in cats if c not in by_cat]
    if unknown:
        raise ValueError(f"unknown EVMQuest categories {unknown}; choose from {sorted(by_cat)}")
    return {c: sorted(by_cat[c])[:per_category] for c in cats}


def liveweb_families(n: int, families: tuple[str, ...] | None = None) -> dict[str, tuple[str, str]]:
    """``n`` LiveWeb test families (``site.template``) as ``{family: (stream task, calibration task)}``.

    Families with at least two test tasks, taken in turn from each site (shop, forum, admin, ...) in
    task-list order so that a small ``n`` still mixes sites; or exactly ``families`` when given.
    """
    from lynn.envs.liveweb.liveweb_env import LiveWebEnv

    by_fam: dict[str, list[str]] = {}
    for t in LiveWebEnv.list_tasks("test"):
        by_fam.setdefault(t["task_id"].rsplit(".", 1)[0], []).append(t["task_id"])
    usable = {f: ids for f, ids in by_fam.items() if len(ids) >= 2}
    if families is not None:
        unknown = [f for f in families if f not in usable]
        if unknown:
            raise ValueError(
                f"unknown LiveWeb families {unknown} (or with one test task); choose from {sorted(usable)}"
            )
        chosen = list(families)
    else:
        by_site: dict[str, list[str]] = {}
        for f in usable:
            by_site.setdefault(f.split(".", 1)[0], []).append(f)
        queues = list(by_site.values())
        chosen = []
        while len(chosen) < min(n, len(usable)):
            for q in queues:
                if q and len(chosen) < n:
                    chosen.append(q.pop(0))
    return {f: (usable[f][0], usable[f][1]) for f in chosen}


@dataclass
class RealPool(Scenario):
    """Real EVMQuest atomic task instances routed to real workers (see the module docstring).

    Attributes:
        workers: a ``"module:callable"`` factory returning a list of :class:`Worker`, or the list
            itself (default: the suite LM's pool, see the module docstring).
        worker_kwargs: keyword arguments of the factory (model paths, prices, failure rate, ...).
        categories: EVMQuest categories (subtask types); ``None``: all.
        tasks_per_category: tasks per category in the stream.
        stream_seeds: reset seeds of the stream's instances.
        calibration_seeds: reset seeds of the calibration run (disjoint from ``stream_seeds``).
        cache: the result cache file (``None``: in memory only).
        exact_regret: run every available worker on each routed instance (cached) for exact regret.
        shocks: shock dicts (see the module docstring).
        liveweb: LiveWeb test families (subtask types ``web:<family>``) added to the stream.
        liveweb_families: exactly these families instead (``site.template`` names).
    """

    name: ClassVar[str] = "real-pool"
    description: ClassVar[str] = (
        "real EVMQuest atomic tasks (and LiveWeb test instances) routed to real Lynn agents"
    )
    real: ClassVar[bool] = True

    workers: Any = "lynn.agents.workers:evmquest_pool"
    worker_kwargs: dict[str, Any] = field(default_factory=dict)
    categories: tuple[str, ...] | None = None
    tasks_per_category: int = 1
    stream_seeds: tuple[int, ...] = (0, 1, 2)
    calibration_seeds: tuple[int, ...] = (90_000,)
    cache: str | None = "results/coordination/real_pool_cache.jsonl"
    exact_regret: bool = True
    shocks: tuple[dict[str, Any], ...] = ()
    liveweb: int = 0
    liveweb_families: tuple[str, ...] | None = None
    p_hard: float = 0.0
    dynamics: PoolDynamics = field(
        default_factory=lambda: PoolDynamics(load_per_call=0.10, reputation_decay=0.95)
    )

    def __post_init__(self) -> None:
        self.categories = tuple(self.categories) if self.categories is not None else None
        self._tasks = evmquest_tasks(self.categories, self.tasks_per_category)
        if not isinstance(self.liveweb, int) or self.liveweb < 0:
            raise ValueError(f"liveweb must be a number of LiveWeb families >= 0, got {self.liveweb!r}")
        fams = tuple(self.liveweb_families) if self.liveweb_families is not None else None
        self._web = liveweb_families(self.liveweb, fams) if (self.liveweb or fams) else {}
        self.type_names = (*self._tasks, *(f"web:{f}" for f in self._web))
        if not self.type_names:
            raise ValueError("the stream is empty: give EVMQuest categories or liveweb=N families")
        if set(self.stream_seeds) & set(self.calibration_seeds):
            raise ValueError(
                "stream_seeds and calibration_seeds must not overlap (cards come from other instances)"
            )
        for s in self.shocks:
            if s.get("kind") not in SHOCK_KINDS or "worker" not in s or "step" not in s:
                raise ValueError(
                    f"bad shock {s!r}: need step, kind in {SHOCK_KINDS}, worker (and 'to' for degrade)"
                )
            if s["kind"] == "degrade" and "to" not in s:
                raise ValueError(f"degrade shock {s!r} needs 'to': the worker whose model replaces it")
        self._all: list[Worker] | None = None
        self._cache: ResultCache | None = None
        self.calibration_s: float | None = None

    # --- workers ------------------------------------------------------------------------------
    def all_workers(self) -> list[Worker]:
        """Every worker the factory builds (built once; processes start on their first call)."""
        if self._all is None:
            made = self.workers
            if isinstance(made, str):
                made = resolve_factory(made)(**self.worker_kwargs)
            made = list(made)
            for w in made:
                if not isinstance(w, Worker):
                    raise ValueError(
                        f"{w!r} does not follow the Worker protocol (name, key, deterministic, run, alive, close)"
                    )
            names = [w.name for w in made]
            if len(set(names)) != len(names):
                raise ValueError(f"worker names must be unique, got {names}")
            for s in self.shocks:
                for who in (s["worker"], s.get("to")):
                    if who is not None and who not in names:
                        raise ValueError(f"shock {s!r} names worker {who!r}, not in the pool {names}")
            self._all = made
        return self._all

    def _by_name(self) -> dict[str, Worker]:
        return {w.name: w for w in self.all_workers()}

    def _slot_plan(self) -> list[str]:
        """Worker names per slot: all but the degrade targets; join targets start absent."""
        replacing = {s["to"] for s in self.shocks if s["kind"] == "degrade"}
        return [w.name for w in self.all_workers() if w.name not in replacing]

    @property
    def n_slots(self) -> int:
        return len(self._slot_plan())

    @property
    def result_cache(self) -> ResultCache:
        if self._cache is None:
            self._cache = ResultCache(self.cache)
        return self._cache

    def instances(self, seeds: tuple[int, ...]) -> dict[str, list[TaskRef]]:
        """Per subtask type, its instances: EVMQuest tasks x ``seeds``; a LiveWeb family's calibration
        task when ``seeds`` are the calibration seeds, else its stream task (reset seed 0)."""
        out = {
            c: [TaskRef(EVMQUEST, t, s, c) for t in tasks for s in seeds] for c, tasks in self._tasks.items()
        }
        calibration = tuple(seeds) == tuple(self.calibration_seeds)
        for fam, (stream_task, calib_task) in self._web.items():
            out[f"web:{fam}"] = [
                TaskRef(LIVEWEB, calib_task if calibration else stream_task, 0, f"web:{fam}")
            ]
        return out

    # --- calibration --------------------------------------------------------------------------
    def calibrate(self) -> dict[str, dict[str, float]]:
        """Each worker's smoothed success per category on the calibration instances (cached runs)."""
        start = time.perf_counter()
        cache = self.result_cache
        cards: dict[str, dict[str, float]] = {}
        insts = self.instances(self.calibration_seeds)
        for w in self.all_workers():
            card = {}
            for c, refs in insts.items():
                ok = []
                for ref in refs:
                    try:
                        ok.append(cache.run(w, ref, 0)[0].success)
                    except WorkerDied:
                        ok.append(False)
                card[c] = (sum(ok) + 0.5) / (len(ok) + 1.0)
            cards[w.name] = card
        self.calibration_s = time.perf_counter() - start
        self.cards = cards
        return cards

    def _profile(self, w: Worker) -> AgentProfile:
        stats = [
            self.result_cache.get(w, r, 0)
            for refs in self.instances(self.calibration_seeds).values()
            for r in refs
        ]
        stats = [o for o in stats if o is not None]
        cost = float(np.mean([o.cost for o in stats])) if stats else 0.0
        latency = float(np.mean([o.latency_s for o in stats])) * 1000.0 if stats else 1000.0
        cap = tuple(self.cards[w.name][c] for c in self.type_names)
        return AgentProfile(w.name, cost, max(latency, 1.0), 1.0, 1.0, cap)

    # --- scenario hooks -----------------------------------------------------------------------
    def populate(self, pool: AgentPool, rng: np.random.Generator) -> None:
        # A new episode starts with a healthy pool: a worker killed in the last one gets a fresh process.
        for w in self.all_workers():
            restart = getattr(w, "restart", None)
            if not w.alive() and restart is not None:
                restart()
        self.calibrate()
        by_name = self._by_name()
        joiners = {s["worker"] for s in self.shocks if s["kind"] == "join"}
        self._slot_worker: list[Worker | None] = []
        self._killed: set[str] = set()
        self._reported_dead: set[int] = set()
        self._stream = self.instances(self.stream_seeds)
        for slot, name in enumerate(self._slot_plan()):
            w = by_name[name]
            if name in joiners:
                self._slot_worker.append(None)
                continue
            pool.set_agent(slot, self._profile(w))
            self._slot_worker.append(w)

    def sample_subtask(self, t: int, rng: np.random.Generator) -> Subtask:
        k = int(rng.integers(self.n_types))
        refs = self._stream[self.type_names[k]]
        ref = refs[int(rng.integers(len(refs)))]
        req = np.zeros(self.n_types)
        req[k] = 1.0
        return RealSubtask(type=k, hard=False, requirement=req, instance=ref)

    def on_step(self, t: int, pool: AgentPool, rng: np.random.Generator) -> list[str]:
        events = []
        by_name = self._by_name()
        for s in self.shocks:
            if s["step"] != t:
                continue
            name = s["worker"]
            if s["kind"] == "kill":
                slot = self._slot_of(name)
                w = self._slot_worker[slot] if slot is not None else None
                if w is not None:
                    kill = getattr(w, "kill", None)
                    if kill is not None:
                        kill()
                    self._killed.add(w.name)
                    self._mark_offline(pool, slot, "its process was killed")
                    events.append(f"shock: {name} process killed (unavailable)")
            elif s["kind"] == "degrade":
                slot = self._slot_of(name)
                if slot is not None:
                    self._slot_worker[slot] = by_name[s["to"]]  # silent: the card stays
                    events.append(f"shock: {name} degraded (now runs {s['to']}'s model)")
            else:
                empty = [i for i, w in enumerate(self._slot_worker) if w is None]
                target = self._slot_plan().index(name)
                slot = target if target in empty else (empty[0] if empty else None)
                if slot is not None:
                    self._slot_worker[slot] = by_name[name]
                    pool.set_agent(slot, self._profile(by_name[name]))
                    events.append(f"join: {name} (slot {slot})")
        # Heartbeat: a started worker whose process is gone is offline from now on.
        for slot, w in enumerate(self._slot_worker):
            if w is not None and not pool.offline[slot] and not w.alive():
                self._killed.add(w.name)
                self._mark_offline(pool, slot, "its process died")
                events.append(f"unavailable: {pool.names()[slot]} process died")
        return events

    def _slot_of(self, name: str) -> int | None:
        """The slot of the worker called ``name`` (its slot keeps the name after a degrade), if present."""
        plan = self._slot_plan()
        if name in plan and self._slot_worker[plan.index(name)] is not None:
            return plan.index(name)
        return None

    def _mark_offline(self, pool: AgentPool, slot: int, reason: str) -> None:
        pool.offline[slot] = True
        pool.offline_reason[slot] = reason

    # --- executions ---------------------------------------------------------------------------
    def _vote(self, slot: int, ref: TaskRef, votes: int, pool: AgentPool) -> tuple[list[Outcome], str | None]:
        w = self._slot_worker[slot]
        assert w is not None
        if w.name in self._killed:
            return [], f"worker {pool.names()[slot]} is dead"
        outs = []
        for j in range(votes):
            try:
                outs.append(self.result_cache.run(w, ref, j)[0])
            except WorkerDied as exc:
                self._killed.add(w.name)
                self._mark_offline(pool, slot, "its process died")
                return outs, f"worker {pool.names()[slot]} died during the call ({exc})"
        return outs, None

    def expected(self, pool: AgentPool, task: Subtask, votes: int) -> np.ndarray:
        """Per slot, 1 if the worker's majority vote on this instance succeeds (cached), else 0.

        With ``exact_regret`` every available worker runs the instance (once: cached); otherwise
        uncached workers count 0.
        """
        assert isinstance(task, RealSubtask) and task.instance is not None
        q = np.zeros(pool.n_slots)
        avail = pool.available()
        for slot, w in enumerate(self._slot_worker):
            if w is None or not avail[slot] or w.name in self._killed:
                continue
            if self.exact_regret:
                outs, err = self._vote(slot, task.instance, votes, pool)
                if err is not None:
                    continue
            else:
                outs = [self.result_cache.get(w, task.instance, j) for j in range(votes)]
                if any(o is None for o in outs):
                    continue
            q[slot] = float(sum(o.success for o in outs) * 2 > votes)
        return q

    def execute(
        self, slot: int, task: Subtask, votes: int, pool: AgentPool
    ) -> tuple[np.ndarray, float, float, str | None]:
        """Run ``votes`` executions on ``slot``: (successes, mean latency ms, total cost, failure note)."""
        assert isinstance(task, RealSubtask) and task.instance is not None
        outs, err = self._vote(slot, task.instance, votes, pool)
        ok = np.zeros(votes, dtype=bool)
        ok[: len(outs)] = [o.success for o in outs]
        latency_ms = (
            1000.0 * float(np.mean([o.latency_s for o in outs])) if outs else 2.0 * pool.dyn.latency_scale_ms
        )
        cost = float(sum(o.cost for o in outs))
        a = pool.dyn.latency_ema
        pool.latency[slot] = (1.0 - a) * pool.latency[slot] + a * latency_ms
        pool.load[slot] = min(1.0, pool.load[slot] + pool.dyn.load_per_call)
        return ok, latency_ms, cost, err

    def close(self) -> None:
        """Stop every worker process."""
        for w in self._all or []:
            w.close()
