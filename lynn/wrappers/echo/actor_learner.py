"""``ActorLearner``: Echo's inference swarm (rollout workers) feeding a training swarm (the learner).

You provide two objects:

- a **worker factory** ``make_worker(worker_index) -> worker`` (picklable; called inside each
  worker process or Ray actor) whose worker has ``set_weights(weights)`` and
  ``rollout(seed) -> data`` (one trajectory or a small batch of them, any picklable value);
- a **learner** with ``get_weights() -> weights`` and ``update(batch: list[data]) -> dict``
  (one optimisation step on ``R`` rollouts; returns metrics), and optionally
  ``validate(data) -> str | None``: a rollout for which it returns a reason is refused (logged on
  ``lynn.echo`` with the worker and the reason, counted in ``stats.refused``, never consumed; pull
  mode asks for a replacement).

::

    al = ActorLearner(make_worker, learner, mode="push_pull", num_workers=4,
                      rollouts_per_update=8, staleness=2, kappa=1, backend="local")
    stats = al.run(updates=100)
    print(stats.summary())
    al.close()

Modes (see :class:`lynn.wrappers.echo.core.Coordinator`): ``pull`` asks for exactly ``R``
rollouts at the current weights after every update (on-policy; the learner waits for them);
``push_pull`` keeps every worker generating with the newest published weights, tags each rollout
with its version, and lets the learner consume those with staleness ``t − version ≤ S`` while
publishing every ``κ`` updates; stale ones are dropped and counted.

Backends: ``local`` runs each worker in its own process (``spawn``); ``ray`` runs each as a Ray
actor (``address=`` joins an existing cluster, otherwise a local Ray is started and stopped with
this object) and publishes weights through Ray's object store (one ``ray.put`` per version; a
worker fetches a version only when it is newer than the one it holds). A worker that dies is
replaced; its rollout in flight is counted in ``stats.lost``.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import pickle
import signal
import threading
import time
import traceback
import weakref
from collections.abc import Callable
from multiprocessing.connection import Connection, wait
from typing import Any, Protocol

from lynn.raytools import ray_init
from lynn.wrappers.echo.core import Coordinator, EchoStats, Rollout

__all__ = ["BACKENDS", "ActorLearner", "LearnerProtocol", "WorkerProtocol"]

BACKENDS = ("local", "ray")
log = logging.getLogger("lynn.echo")


class WorkerProtocol(Protocol):
    def set_weights(self, weights: Any) -> None: ...
    def rollout(self, seed: int) -> Any: ...


class LearnerProtocol(Protocol):
    def get_weights(self) -> Any: ...
    def update(self, batch: list[Any]) -> dict[str, float]: ...


_ERROR = "__echo_worker_error__"

# Events a pool reports: ("done", worker, rollout_id, version, data) or ("lost", worker, reason).
Event = tuple[Any, ...]


# --- local backend: one process per worker -----------------------------------------------------
def _local_worker(index: int, make_worker: Any, pipe: Connection) -> None:
    """Serve rollout requests: (rollout_id, version, weights blob or None, seed)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent owns Ctrl-C and shuts us down
    try:
        worker = pickle.loads(make_worker)(index)
        while True:
            try:
                msg = pipe.recv()
            except (EOFError, OSError):
                return
            if msg is None:
                return
            rollout_id, version, blob, seed = msg
            if blob is not None:
                worker.set_weights(pickle.loads(blob))
            data = worker.rollout(seed)
            pipe.send((rollout_id, version, data))
    except Exception:  # a bug in user code: report it (the run stops), do not pass it off as a crash
        try:
            pipe.send((_ERROR, None, traceback.format_exc(limit=10)))
        except Exception:
            pass


class LocalPool:
    """Worker processes on this machine, talking over pipes."""

    backend = "local"

    def __init__(
        self, make_worker: Callable[[int], WorkerProtocol], num_workers: int, context: str = "spawn"
    ) -> None:
        import cloudpickle

        self._factory = cloudpickle.dumps(make_worker)
        self._ctx = mp.get_context(context)
        self.num_workers = num_workers
        self._procs: list[Any] = [None] * num_workers
        self._pipes: list[Connection | None] = [None] * num_workers
        self._held = [-1] * num_workers  # version each worker holds
        self._busy: set[int] = set()
        self._weights: dict[int, bytes] = {}
        self.restarts = 0
        for i in range(num_workers):
            self._start(i)
        self._finalizer = weakref.finalize(self, LocalPool._shutdown, self._procs, self._pipes)

    def _start(self, i: int) -> None:
        parent, child = self._ctx.Pipe()
        proc = self._ctx.Process(
            target=_local_worker, args=(i, self._factory, child), daemon=True, name=f"echo-worker-{i}"
        )
        proc.start()
        child.close()
        self._procs[i], self._pipes[i] = proc, parent
        self._held[i] = -1

    def publish(self, version: int, weights: Any) -> None:
        self._weights[version] = pickle.dumps(weights, protocol=pickle.HIGHEST_PROTOCOL)
        for old in [v for v in self._weights if v < version]:
            if old not in self._held:
                del self._weights[old]

    def idle(self) -> list[int]:
        return [i for i in range(self.num_workers) if i not in self._busy and self._pipes[i] is not None]

    def submit(self, worker: int, rollout_id: int, version: int, seed: int) -> None:
        blob = self._weights[version] if self._held[worker] != version else None
        pipe = self._pipes[worker]
        assert pipe is not None
        self._busy.add(worker)
        try:
            pipe.send((rollout_id, version, blob, seed))
        except (BrokenPipeError, OSError):
            pass  # reported as lost by the next poll (the pipe reads EOF)
        self._held[worker] = version

    def poll(self, timeout: float) -> list[Event]:
        pipes = {self._pipes[i]: i for i in self._busy if self._pipes[i] is not None}
        if not pipes:
            time.sleep(timeout)
            return []
        events: list[Event] = []
        for conn in wait(list(pipes), timeout=timeout):
            i = pipes[conn]  # type: ignore[index]
            self._busy.discard(i)
            try:
                rollout_id, version, data = conn.recv()  # type: ignore[union-attr]
            except (EOFError, OSError):
                code = self._procs[i].exitcode if self._procs[i] is not None else None
                events.append(("lost", i, f"worker process exited (code {code})"))
                self._restart(i)
                continue
            if rollout_id == _ERROR:
                raise RuntimeError(f"Echo worker {i} raised an exception:\n{data}")
            events.append(("done", i, rollout_id, version, data))
        return events

    def _restart(self, i: int) -> None:
        pipe, proc = self._pipes[i], self._procs[i]
        if pipe is not None:
            pipe.close()
        if proc is not None:
            proc.join(timeout=2)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=2)
        self.restarts += 1
        self._start(i)

    def kill(self, worker: int) -> None:
        """Fault injection: SIGKILL worker ``worker``'s process."""
        proc = self._procs[worker]
        if proc is not None and proc.pid:
            os.kill(proc.pid, signal.SIGKILL)

    def pids(self) -> list[int]:
        return [p.pid for p in self._procs if p is not None]

    @staticmethod
    def _shutdown(procs: list[Any], pipes: list[Any]) -> None:
        for pipe in pipes:
            if pipe is not None:
                try:
                    pipe.send(None)
                except Exception:
                    pass
        for proc in procs:
            if proc is None:
                continue
            proc.join(timeout=1.0)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=2)
        for pipe in pipes:
            if pipe is not None:
                pipe.close()

    def close(self) -> None:
        self._finalizer()


# --- ray backend: one actor per worker ---------------------------------------------------------
class _RayWorkerImpl:
    """Body of the Ray actor (wrapped with ``ray.remote`` at run time so Ray stays optional)."""

    def __init__(self, index: int, make_worker: Any) -> None:
        self.worker = make_worker(index)
        self.version = -1

    def rollout(
        self, rollout_id: int, version: int, weights_ref: list[Any], seed: int
    ) -> tuple[int, int, Any]:
        import ray

        if version != self.version:
            # The ref is wrapped in a list so Ray does not resolve it eagerly: fetch only when new.
            self.worker.set_weights(ray.get(weights_ref[0]))
            self.version = version
        return rollout_id, version, self.worker.rollout(seed)

    def pid(self) -> int:
        return os.getpid()


class RayPool:
    """Workers as Ray actors; weights go through the object store."""

    backend = "ray"

    def __init__(
        self,
        make_worker: Callable[[int], WorkerProtocol],
        num_workers: int,
        address: str | None = None,
        num_cpus: int | None = None,
        temp_dir: str | None = None,
        actor_options: dict[str, Any] | None = None,
    ) -> None:
        import ray

        self._ray = ray
        self._owns_ray = ray_init(address, num_cpus, temp_dir)
        self._cls = ray.remote(_RayWorkerImpl).options(num_cpus=0, **(actor_options or {}))
        self._make = make_worker
        self.num_workers = num_workers
        self._actors: list[Any] = [self._cls.remote(i, make_worker) for i in range(num_workers)]
        self._futures: dict[Any, int] = {}
        self._refs: dict[int, Any] = {}
        self.restarts = 0

    def publish(self, version: int, weights: Any) -> None:
        self._refs[version] = self._ray.put(weights)
        busy_versions = set(self._refs) - {version}
        for old in busy_versions:  # older snapshots go once no request can still ask for them
            if old < version - 1:
                del self._refs[old]

    def idle(self) -> list[int]:
        busy = set(self._futures.values())
        return [i for i in range(self.num_workers) if i not in busy]

    def submit(self, worker: int, rollout_id: int, version: int, seed: int) -> None:
        fut = self._actors[worker].rollout.remote(rollout_id, version, [self._refs[version]], seed)
        self._futures[fut] = worker

    def poll(self, timeout: float) -> list[Event]:
        if not self._futures:
            time.sleep(timeout)
            return []
        ready, _ = self._ray.wait(list(self._futures), num_returns=len(self._futures), timeout=timeout)
        events: list[Event] = []
        for fut in ready:
            i = self._futures.pop(fut)
            try:
                rollout_id, version, data = self._ray.get(fut)
            except (self._ray.exceptions.RayActorError, self._ray.exceptions.ActorDiedError) as exc:
                events.append(("lost", i, f"ray actor died ({type(exc).__name__})"))
                self.restarts += 1
                self._actors[i] = self._cls.remote(i, self._make)
                continue
            events.append(("done", i, rollout_id, version, data))
        return events

    def kill(self, worker: int) -> None:
        """Fault injection: kill worker ``worker``'s actor."""
        self._ray.kill(self._actors[worker], no_restart=True)

    def pids(self) -> list[int]:
        return list(self._ray.get([a.pid.remote() for a in self._actors]))

    def close(self) -> None:
        for actor in self._actors:
            try:
                self._ray.kill(actor, no_restart=True)
            except Exception:
                pass
        self._actors = []
        self._futures.clear()
        self._refs.clear()
        if self._owns_ray and self._ray.is_initialized():
            self._ray.shutdown()
            self._owns_ray = False


# --- the runner ---------------------------------------------------------------------------------
class ActorLearner:
    """Run a learner against rollout workers in ``pull`` or ``push_pull`` mode.

    Args:
        make_worker: ``make_worker(i)`` builds worker ``i`` (picklable; runs in the worker).
        learner: the learner (lives in this process).
        mode: ``pull`` or ``push_pull``.
        num_workers: rollout workers.
        rollouts_per_update: ``R``.
        staleness: ``S`` (``push_pull``).
        kappa: publish every ``κ`` updates (``push_pull``); ``1 <= κ <= S + 1``.
        backend: ``local`` or ``ray``.
        address: Ray cluster to join (``ray`` backend), e.g. ``"10.0.0.1:6379"``.
        seed: rollout ``k`` is generated with seed ``seed + k``.
        ray_num_cpus: CPUs for a Ray started here; ray_temp_dir: its temp dir.
        order: consumption order, ``freshest`` or ``fifo`` (see ``Coordinator``).
        context: start method of ``local`` worker processes (``spawn`` is safe with torch and
            threads in this process; ``fork`` starts faster).
        max_consecutive_failures: a worker that dies this many times in a row without finishing a
            rollout stops the run with an error (a crash loop is a bug, not bad luck). An exception
            raised by the worker's own code stops the run at once, on both backends.
    """

    def __init__(
        self,
        make_worker: Callable[[int], WorkerProtocol],
        learner: LearnerProtocol,
        *,
        mode: str = "push_pull",
        num_workers: int = 2,
        rollouts_per_update: int = 4,
        staleness: int = 1,
        kappa: int = 1,
        backend: str = "local",
        address: str | None = None,
        seed: int = 0,
        ray_num_cpus: int | None = None,
        ray_temp_dir: str | None = None,
        order: str = "freshest",
        context: str = "spawn",
        max_consecutive_failures: int = 5,
    ) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        if num_workers < 1:
            raise ValueError("num_workers must be at least 1")
        # Validates mode/staleness/kappa before any process starts.
        Coordinator(mode, rollouts_per_update, staleness, kappa, order)
        self.mode, self.R, self.S, self.kappa, self.order = mode, rollouts_per_update, staleness, kappa, order
        self.learner = learner
        self.seed = seed
        self.num_workers = num_workers
        self.max_consecutive_failures = max_consecutive_failures
        if backend == "local":
            self.pool: LocalPool | RayPool = LocalPool(make_worker, num_workers, context)
        else:
            self.pool = RayPool(make_worker, num_workers, address, ray_num_cpus, ray_temp_dir)
        self.backend = backend
        self.coordinator: Coordinator | None = None
        self.loss_reports: list[str] = []

    def kill_worker(self, worker: int) -> None:
        """Fault injection (tests, chaos drills): kill one worker's process or actor."""
        self.pool.kill(worker)

    def run(
        self,
        updates: int,
        time_budget: float | None = None,
        drain_s: float = 5.0,
        on_update: Callable[[dict[str, Any]], None] | None = None,
    ) -> EchoStats:
        """Do ``updates`` learner updates (or stop at ``time_budget`` seconds); return the stats.

        ``on_update(record)`` is called after each update with its metrics record (progress bars,
        checkpoints, fault drills); it runs on the learner's clock.
        """
        coord = Coordinator(self.mode, self.R, self.S, self.kappa, self.order)
        self.coordinator = coord
        stats = EchoStats(mode=self.mode, backend=self.backend)
        lock = threading.Condition()
        stop = threading.Event()
        errors: list[BaseException] = []
        restarts0 = self.pool.restarts
        failures = [0] * self.num_workers  # consecutive losses per worker
        validate = getattr(self.learner, "validate", None)
        self.refusals: list[str] = []

        with lock:
            self.pool.publish(0, self.learner.get_weights())
            coord.published(0)

        def dispatcher() -> None:
            try:
                while not stop.is_set():
                    with lock:
                        for w, rid, version in coord.requests(self.pool.idle()):
                            self.pool.submit(w, rid, version, self.seed + rid)
                    events = self.pool.poll(0.01)
                    if events:
                        with lock:
                            for ev in events:
                                if ev[0] == "done":
                                    _, w, rid, version, data = ev
                                    failures[w] = 0
                                    reason = validate(data) if validate is not None else None
                                    if reason:
                                        coord.refuse(w)
                                        msg = f"refused malformed rollout {rid} from worker {w} (version {version}): {reason}"
                                        self.refusals.append(msg)
                                        log.warning(msg)
                                    else:
                                        coord.arrived(w, Rollout(rid, w, version, data))
                                else:
                                    if coord.worker_lost(ev[1]):
                                        self.loss_reports.append(f"worker {ev[1]}: {ev[2]}")
                                    failures[ev[1]] += 1
                                    if failures[ev[1]] > self.max_consecutive_failures:
                                        raise RuntimeError(
                                            f"Echo worker {ev[1]} died {failures[ev[1]]} times in a row "
                                            f"without finishing a rollout (last: {ev[2]})"
                                        )
                            lock.notify_all()
            except BaseException as exc:  # surfaced by run()
                errors.append(exc)
                with lock:
                    lock.notify_all()

        thread = threading.Thread(target=dispatcher, name="echo-dispatcher", daemon=True)
        start = time.perf_counter()
        first_update: float | None = None
        busy = 0.0
        thread.start()
        try:
            while coord.t < updates:
                if time_budget is not None and time.perf_counter() - start > time_budget:
                    break
                with lock:
                    batch = coord.take()
                    while batch is None and not errors:
                        lock.wait(0.05)
                        if time_budget is not None and time.perf_counter() - start > time_budget:
                            break
                        batch = coord.take()
                if errors:
                    raise errors[0]
                if batch is None:
                    break
                t0 = time.perf_counter()
                first_update = t0 if first_update is None else first_update
                metrics = self.learner.update([r.data for r in batch])
                publish = False
                with lock:
                    publish = coord.updated()
                if publish:
                    weights = self.learner.get_weights()
                    busy += time.perf_counter() - t0  # serialising the snapshot is learner work
                    with lock:
                        self.pool.publish(coord.t, weights)
                        coord.published(coord.t)
                else:
                    busy += time.perf_counter() - t0
                record = dict(metrics or {})
                record.update(
                    step=coord.t,
                    max_staleness=max(coord.t - 1 - r.version for r in batch),
                    time_s=time.perf_counter() - start,
                )
                stats.metrics.append(record)
                if on_update is not None:
                    on_update(record)
            end = time.perf_counter()
            # Let requests in flight finish so that every dispatched rollout is accounted for.
            with lock:
                coord.close()
            deadline = time.perf_counter() + drain_s
            while coord.in_flight and time.perf_counter() < deadline and not errors:
                time.sleep(0.01)
        finally:
            stop.set()
            thread.join(timeout=10)
        stats.wall_s = end - start
        stats.learner_busy_s = busy
        if first_update is not None and end > first_update:
            stats.utilisation = busy / (end - first_update)
        stats.utilisation_total = busy / stats.wall_s if stats.wall_s > 0 else 0.0
        coord.fill(stats)
        stats.rollouts_per_s = coord.generated / stats.wall_s if stats.wall_s > 0 else 0.0
        stats.worker_restarts = self.pool.restarts - restarts0
        return stats

    def close(self) -> None:
        """Stop every worker (and Ray, if this object started it)."""
        self.pool.close()

    def __enter__(self) -> ActorLearner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
