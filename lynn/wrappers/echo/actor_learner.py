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
this object). A worker that dies is replaced; its rollout in flight is counted in ``stats.lost``.

Weight publication (every ``κ`` updates), ``broadcast=``:

- ``direct`` (default): the learner sends each worker the snapshot itself — a pickled blob with
  the worker's next request (``local``) or one ``ray.put`` per version that each actor fetches
  (``ray``); a worker receives a version only when it is newer than the one it holds;
- ``chain``: ECHO-2's peer-assisted pipelined broadcast. The learner cuts the pickled snapshot into
  ``chunk_bytes`` chunks and sends each **once**, to the first worker of a chain; every worker
  relays each chunk to the next one as soon as it has it (relay threads in each worker process
  behind a Unix socket per worker, one stream per sender, on ``local``; a threaded actor method
  passing the bytes on, on ``ray``), while it goes on generating. A request names the version; the worker waits until it
  holds every chunk of it (``stats.weight_wait_s`` sums that wait). When a worker dies, the newest
  version, and every older one that a worker downstream was asked for, is sent again along the rest
  of the chain from its replacement, so no worker downstream of the dead relay waits for chunks that
  will never come (on ``ray`` every version published between the death and its detection is lost
  past the dead actor). ``pool.learner_sent_bytes`` counts
  what left the learner (the model once per version, against ``N`` times for ``direct``).

Versions are keyed internally by a publication counter that never restarts, so a second
:meth:`ActorLearner.run` (whose versions start again at 0) never reuses a worker's old weights.
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
from collections.abc import Callable, Iterable
from multiprocessing.connection import Connection
from typing import Any, Protocol

from lynn.raytools import ray_init
from lynn.wrappers.echo.core import Coordinator, EchoStats, Rollout
from lynn.wrappers.echo.pipes import wait_pipes

__all__ = ["BACKENDS", "BROADCASTS", "ActorLearner", "LearnerProtocol", "WorkerProtocol"]

BACKENDS = ("local", "ray")
BROADCASTS = ("direct", "chain")
CHUNK_BYTES = 1 << 20
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


# --- chain broadcast: what each worker keeps ---------------------------------------------------
class _ChainStore:
    """Chunks of published snapshots, assembled per publication key; waits for a complete one.

    ``relay(key, k, n, chunk, route)`` stores chunk ``k`` of ``n`` and returns what to forward
    (the same chunk to ``route[0]`` with ``route[1:]``), even for a key already complete, so a
    re-sent version always reaches the end of the chain.
    """

    def __init__(self, keep: int = 4) -> None:
        self.keep = keep
        self.parts: dict[int, dict[int, bytes]] = {}
        self.complete: dict[int, bytes] = {}
        self.cond = threading.Condition()

    def add(self, key: int, k: int, n: int, chunk: bytes) -> None:
        with self.cond:
            if key in self.complete:
                return
            parts = self.parts.setdefault(key, {})
            parts[k] = chunk
            if len(parts) == n:
                self.complete[key] = b"".join(parts[i] for i in range(n))
                del self.parts[key]
                for old in sorted(self.complete)[: -self.keep]:
                    del self.complete[old]
                # Older partial ones stay (a worker may still wait on one whose re-send is on its way,
                # its chunks racing a newer version's), up to ``keep`` of them.
                for old in sorted(self.parts)[: -self.keep]:
                    del self.parts[old]
                self.cond.notify_all()

    def wait(self, key: int, timeout: float) -> tuple[Any, float]:
        """The weights published under ``key`` (unpickled) and the seconds spent waiting for them."""
        t0 = time.perf_counter()
        with self.cond:
            if not self.cond.wait_for(lambda: key in self.complete, timeout=timeout):
                have = sorted(self.complete)
                raise TimeoutError(
                    f"chain broadcast: publication {key} not complete after {timeout:.0f}s "
                    f"(complete: {have}, partial: { {x: len(p) for x, p in self.parts.items()} })"
                )
            blob = self.complete[key]
        return pickle.loads(blob), time.perf_counter() - t0


def _prune_chain(chain: dict[int, Any], newest: int, asked: Iterable[int]) -> None:
    """Keep the chunks of the newest version and of the versions requests in flight name."""
    keep = {newest, *asked}
    for v in [v for v in chain if v not in keep]:
        del chain[v]


def _chunks(blob: bytes, chunk_bytes: int) -> list[bytes]:
    return [blob[i : i + chunk_bytes] for i in range(0, len(blob), chunk_bytes)] or [b""]


class _Link:
    """One sender's connection to a worker's relay socket (reconnects after the worker restarts).

    Every sender has its own stream to each receiver, so nothing is shared between processes: a
    worker killed mid-message leaves no lock held and corrupts no one else's stream.
    """

    def __init__(self, address: str, retry_s: float) -> None:
        self.address, self.retry_s = address, retry_s
        self.conn: Connection | None = None

    def send(self, msg: Any) -> bool:
        """Send ``msg``; on failure reconnect and retry for up to ``retry_s``. False if it never went."""
        from multiprocessing.connection import Client

        deadline = time.monotonic() + self.retry_s
        while True:
            try:
                if self.conn is None:
                    self.conn = Client(self.address, family="AF_UNIX")
                self.conn.send(msg)
                return True
            except (OSError, EOFError):
                self.close()  # reconnect on the next try
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.05)

    def close(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            except OSError:
                pass
            self.conn = None


def _relay_server(index: int, store: _ChainStore, addresses: list[str], retry_s: float) -> None:
    """Worker side of the chain: accept senders on our socket; keep each chunk and pass it on."""
    from multiprocessing.connection import Listener

    address = addresses[index]
    if os.path.exists(address):
        os.unlink(address)  # our predecessor's socket (a restarted worker binds the same path)
    listener = Listener(address, family="AF_UNIX")
    links: dict[int, _Link] = {}
    send_lock = threading.Lock()

    def serve(conn: Connection) -> None:
        while True:
            try:
                key, k, n, chunk, route = conn.recv()
            except (EOFError, OSError):
                conn.close()
                return
            store.add(key, k, n, chunk)  # first: a dead successor must not delay our own copy
            if route:
                with send_lock:
                    link = links.setdefault(route[0], _Link(addresses[route[0]], retry_s))
                    # A successor that stays down loses the chunk; the learner re-sends the newest
                    # version from its replacement (LocalPool._restart).
                    link.send((key, k, n, chunk, route[1:]))

    def accept() -> None:
        while True:
            try:
                conn = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), name="echo-relay", daemon=True).start()

    threading.Thread(target=accept, name="echo-relay-accept", daemon=True).start()


class _Uplink:
    """The learner's uplink (local chain): a thread that sends chunks to the head of each route."""

    def __init__(self, addresses: list[str], retry_s: float) -> None:
        import queue

        self.addresses, self.retry_s = addresses, retry_s
        self.links: dict[int, _Link] = {}
        self.q: queue.Queue[Any] = queue.Queue()
        self.thread = threading.Thread(target=self._loop, name="echo-uplink", daemon=True)
        self.thread.start()

    def put(self, first: int, msg: Any) -> None:
        self.q.put((first, msg))

    def _loop(self) -> None:
        while True:
            item = self.q.get()
            if item is None:
                return
            first, msg = item
            link = self.links.setdefault(first, _Link(self.addresses[first], self.retry_s))
            if not link.send(msg):
                log.warning(
                    "chain broadcast: worker %d unreachable for %.0fs; chunk dropped", first, self.retry_s
                )

    def close(self) -> None:
        self.q.put(None)
        self.thread.join(timeout=5)
        for link in self.links.values():
            link.close()


# --- local backend: one process per worker -----------------------------------------------------
def _local_worker(
    index: int,
    make_worker: Any,
    pipe: Connection,
    addresses: list[str] | None = None,
    bcast_timeout: float = 300.0,
) -> None:
    """Serve rollout requests: (rollout_id, publication key, weights blob or None, seed).

    With ``addresses`` (chain broadcast) weights arrive as chunks on our socket
    ``addresses[index]`` and are relayed by threads; a request with no blob for a key this worker
    does not hold waits for that key.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent owns Ctrl-C and shuts us down
    try:
        store = None
        if addresses is not None:
            store = _ChainStore()
            _relay_server(index, store, addresses, retry_s=min(5.0, bcast_timeout))
        worker = pickle.loads(make_worker)(index)
        held = -1
        while True:
            try:
                msg = pipe.recv()
            except (EOFError, OSError):
                return
            if msg is None:
                return
            rollout_id, key, blob, seed = msg
            waited = 0.0
            if blob is not None:
                worker.set_weights(pickle.loads(blob))
                held = key
            elif store is not None and key != held:
                weights, waited = store.wait(key, bcast_timeout)
                worker.set_weights(weights)
                held = key
            data = worker.rollout(seed)
            pipe.send((rollout_id, waited, data))
    except Exception:  # a bug in user code: report it (the run stops), do not pass it off as a crash
        try:
            pipe.send((_ERROR, None, traceback.format_exc(limit=10)))
        except Exception:
            pass


class LocalPool:
    """Worker processes on this machine, talking over pipes.

    Args:
        make_worker: the worker factory.
        num_workers: processes.
        context: multiprocessing start method.
        broadcast: ``direct`` (the snapshot goes with a worker's next request) or ``chain``
            (chunks relayed worker to worker through per-worker inbox queues).
        chunk_bytes: chunk size for ``chain``.
        bcast_timeout: seconds a worker waits for a version's chunks before it reports an error.
    """

    backend = "local"

    def __init__(
        self,
        make_worker: Callable[[int], WorkerProtocol],
        num_workers: int,
        context: str = "spawn",
        broadcast: str = "direct",
        chunk_bytes: int = CHUNK_BYTES,
        bcast_timeout: float = 300.0,
    ) -> None:
        import cloudpickle

        if broadcast not in BROADCASTS:
            raise ValueError(f"broadcast must be one of {BROADCASTS}, got {broadcast!r}")
        if chunk_bytes < 1:
            raise ValueError("chunk_bytes must be >= 1")
        self._factory = cloudpickle.dumps(make_worker)
        self._ctx = mp.get_context(context)
        self.num_workers = num_workers
        self.broadcast, self.chunk_bytes, self.bcast_timeout = broadcast, chunk_bytes, bcast_timeout
        self._addresses: list[str] | None = None
        self._uplink: _Uplink | None = None
        self._sockdir: str | None = None
        if broadcast == "chain":  # one relay socket per worker, the same path across restarts
            import tempfile

            self._sockdir = tempfile.mkdtemp(prefix="echo-chain-")
            self._addresses = [os.path.join(self._sockdir, f"w{i}.sock") for i in range(num_workers)]
            self._uplink = _Uplink(self._addresses, retry_s=bcast_timeout)
        self._procs: list[Any] = [None] * num_workers
        self._pipes: list[Connection | None] = [None] * num_workers
        self._held = [-1] * num_workers  # publication key each worker holds (direct)
        self._asked: dict[int, int] = {}  # worker -> version of its request in flight
        self._busy: set[int] = set()
        self._weights: dict[int, bytes] = {}  # version -> blob (direct) or the newest blob (chain)
        self._keys: dict[int, int] = {}  # version -> publication key (a counter that never restarts)
        self._next_key = 0
        # chain: version -> (key, chunks) of the newest version and of those a busy worker was asked for
        # (it may wait on them), for the re-sends after a relay died
        self._chain: dict[int, tuple[int, list[bytes]]] = {}
        self._newest = -1
        # publish() runs on the learner's thread, poll() on the dispatcher's (outside the run's lock:
        # it blocks on the workers): this lock guards what both touch (the chain, the requests in
        # flight, the counters). Chunks are sent after it is released, from a snapshot.
        self._lock = threading.RLock()
        self.learner_sent_bytes = 0
        self.weight_wait_s = 0.0
        self.publications = 0
        self.published_bytes = 0  # one pickled copy of each version (its size varies by a few bytes)
        self.restarts = 0
        for i in range(num_workers):
            self._start(i)
        self._finalizer = weakref.finalize(
            self, LocalPool._shutdown, self._procs, self._pipes, self._uplink, self._sockdir
        )

    def _start(self, i: int) -> None:
        parent, child = self._ctx.Pipe()
        proc = self._ctx.Process(  # type: ignore[attr-defined]  # typeshed's BaseContext lacks Process; every real context has it
            target=_local_worker,
            args=(i, self._factory, child, self._addresses, self.bcast_timeout),
            daemon=True,
            name=f"echo-worker-{i}",
        )
        proc.start()
        child.close()
        with self._lock:
            self._procs[i], self._pipes[i] = proc, parent
            self._held[i] = -1

    def publish(self, version: int, weights: Any) -> None:
        blob = pickle.dumps(weights, protocol=pickle.HIGHEST_PROTOCOL)
        with self._lock:
            key = self._next_key
            self._next_key += 1
            self._keys[version] = key
            for old in [v for v in self._keys if v < version - 1 and v not in self._asked.values()]:
                del self._keys[old]
            self.publications += 1
            self.published_bytes += len(blob)
            if self.broadcast == "direct":
                self._weights[version] = blob  # requests always name the newest version (Coordinator)
                for old in [v for v in self._weights if v not in self._keys]:
                    del self._weights[old]
                return
            self._newest = version
            self._chain[version] = (key, _chunks(blob, self.chunk_bytes))
            _prune_chain(self._chain, version, self._asked.values())
            msgs = self._chain_msgs(list(range(self.num_workers)), [version])
        self._send(msgs)

    def _chain_msgs(self, route: list[int], versions: Iterable[int]) -> list[tuple[int, Any]]:
        """The chunks to send (oldest version first) to ``route[0]``, relayed along ``route``; counts them.

        Call it holding ``_lock``: the list is a snapshot, sent by ``_send`` once the lock is released,
        so a version pruned by a ``publish`` meanwhile still goes out whole.
        """
        if not route or self._uplink is None:
            return []
        first, rest = route[0], tuple(route[1:])
        msgs: list[tuple[int, Any]] = []
        for v in sorted(set(versions) & set(self._chain)):
            key, chunks = self._chain[v]
            for k, chunk in enumerate(chunks):
                msgs.append((first, (key, k, len(chunks), chunk, rest)))
                self.learner_sent_bytes += len(chunk)
        return msgs

    def _send(self, msgs: list[tuple[int, Any]]) -> None:
        if self._uplink is not None:
            for first, msg in msgs:
                self._uplink.put(first, msg)

    def idle(self) -> list[int]:
        with self._lock:
            return [i for i in range(self.num_workers) if i not in self._busy and self._pipes[i] is not None]

    def submit(self, worker: int, rollout_id: int, version: int, seed: int) -> None:
        with self._lock:
            key = self._keys[version]
            blob = None
            if self.broadcast == "direct" and self._held[worker] != key:
                blob = self._weights[version]
                self.learner_sent_bytes += len(blob)
            pipe = self._pipes[worker]
            assert pipe is not None
            self._busy.add(worker)
            self._asked[worker] = version
            self._held[worker] = key
        try:
            pipe.send((rollout_id, key, blob, seed))
        except (BrokenPipeError, OSError):
            pass  # reported as lost by the next poll (the pipe reads EOF)

    def poll(self, timeout: float) -> list[Event]:
        with self._lock:
            pipes = {pipe: i for i in self._busy if (pipe := self._pipes[i]) is not None}
        if not pipes:
            time.sleep(timeout)
            return []
        events: list[Event] = []
        for conn in wait_pipes(pipes, timeout):
            i = pipes[conn]
            with self._lock:
                self._busy.discard(i)
                version = self._asked.pop(i, -1)
            try:
                rollout_id, waited, data = conn.recv()
            except (EOFError, OSError):
                code = self._procs[i].exitcode if self._procs[i] is not None else None
                events.append(("lost", i, f"worker process exited (code {code})"))
                self._restart(i)
                continue
            if rollout_id == _ERROR:
                raise RuntimeError(f"Echo worker {i} raised an exception:\n{data}")
            with self._lock:
                self.weight_wait_s += waited
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
        self._start(i)
        # Chunks the dead relay took but never passed on: send again from here the newest version and
        # every version a worker after it was asked for and may be waiting on. A version published
        # after this snapshot goes along the chain through the new worker.
        with self._lock:
            self.restarts += 1
            route = list(range(i, self.num_workers))
            asked = {v for j, v in self._asked.items() if j > i}
            msgs = self._chain_msgs(route, {self._newest} | asked)
        self._send(msgs)

    def kill(self, worker: int) -> None:
        """Fault injection: SIGKILL worker ``worker``'s process."""
        with self._lock:
            proc = self._procs[worker]
        if proc is not None and proc.pid:
            os.kill(proc.pid, signal.SIGKILL)

    def pids(self) -> list[int]:
        with self._lock:
            return [p.pid for p in self._procs if p is not None]

    @staticmethod
    def _shutdown(
        procs: list[Any], pipes: list[Any], uplink: _Uplink | None = None, sockdir: str | None = None
    ) -> None:
        if uplink is not None:
            uplink.close()
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
        if sockdir is not None:
            import shutil

            shutil.rmtree(sockdir, ignore_errors=True)

    def close(self) -> None:
        self._finalizer()


# --- ray backend: one actor per worker ---------------------------------------------------------
class _RayWorkerImpl:
    """Body of the Ray actor (wrapped with ``ray.remote`` at run time so Ray stays optional).

    With the chain broadcast the actor is threaded (``max_concurrency`` > 1) so ``receive`` (a
    chunk, relayed on at once) runs while ``rollout`` generates or waits for a version.
    """

    def __init__(self, index: int, make_worker: Any, bcast_timeout: float = 300.0) -> None:
        self.worker = make_worker(index)
        self.key = -1
        self.store = _ChainStore()
        self.bcast_timeout = bcast_timeout

    def receive(self, key: int, k: int, n: int, chunk: bytes, route: tuple[Any, ...]) -> None:
        if route:  # pass the bytes on to the next actor (by value: the peer relays, not the learner)
            route[0].receive.remote(key, k, n, chunk, route[1:])
        self.store.add(key, k, n, chunk)

    def rollout(
        self, rollout_id: int, key: int, weights_ref: list[Any] | None, seed: int
    ) -> tuple[int, float, Any]:
        import ray

        waited = 0.0
        if key != self.key:
            if weights_ref is None:  # chain: wait until every chunk of this publication is here
                weights, waited = self.store.wait(key, self.bcast_timeout)
            else:  # the ref is wrapped in a list so Ray does not resolve it eagerly: fetch only when new
                weights = ray.get(weights_ref[0])
            self.worker.set_weights(weights)
            self.key = key
        return rollout_id, waited, self.worker.rollout(seed)

    def pid(self) -> int:
        return os.getpid()


class RayPool:
    """Workers as Ray actors; weights through the object store (``direct``) or relayed (``chain``)."""

    backend = "ray"

    def __init__(
        self,
        make_worker: Callable[[int], WorkerProtocol],
        num_workers: int,
        address: str | None = None,
        num_cpus: int | None = None,
        temp_dir: str | None = None,
        actor_options: dict[str, Any] | None = None,
        broadcast: str = "direct",
        chunk_bytes: int = CHUNK_BYTES,
        bcast_timeout: float = 300.0,
    ) -> None:
        import ray

        if broadcast not in BROADCASTS:
            raise ValueError(f"broadcast must be one of {BROADCASTS}, got {broadcast!r}")
        if chunk_bytes < 1:
            raise ValueError("chunk_bytes must be >= 1")
        self._ray = ray
        self._owns_ray = ray_init(address, num_cpus, temp_dir)
        opts: dict[str, Any] = {"num_cpus": 0, **(actor_options or {})}
        if broadcast == "chain":
            opts.setdefault("max_concurrency", 4)
        self._cls = ray.remote(_RayWorkerImpl).options(**opts)
        self._make = make_worker
        self.num_workers = num_workers
        self.broadcast, self.chunk_bytes, self.bcast_timeout = broadcast, chunk_bytes, bcast_timeout
        self._actors: list[Any] = [
            self._cls.remote(i, make_worker, bcast_timeout) for i in range(num_workers)
        ]
        self._futures: dict[Any, tuple[int, int]] = {}  # future -> (worker, version)
        self._refs: dict[int, Any] = {}
        self._keys: dict[int, int] = {}
        self._next_key = 0
        self._chain: dict[int, tuple[int, list[bytes]]] = {}  # as LocalPool's
        self._newest = -1
        self._lock = threading.RLock()  # as LocalPool's: publish and poll run on different threads
        self.learner_sent_bytes = 0
        self.weight_wait_s = 0.0
        self.publications = 0
        self.published_bytes = 0  # one pickled copy of each version (its size varies by a few bytes)
        self.restarts = 0

    def publish(self, version: int, weights: Any) -> None:
        if self.broadcast == "chain":
            blob = pickle.dumps(weights, protocol=pickle.HIGHEST_PROTOCOL)
        else:
            ref = self._ray.put(weights)
        with self._lock:
            key = self._next_key
            self._next_key += 1
            self._keys[version] = key
            self.publications += 1
            for old in [v for v in self._keys if v < version - 1]:
                del self._keys[old]
            if self.broadcast == "direct":
                self._refs[version] = ref
                for old in [v for v in self._refs if v not in self._keys]:
                    del self._refs[old]  # older snapshots go once no request can still ask for them
                return
            self.published_bytes += len(blob)
            self._newest = version
            self._chain[version] = (key, _chunks(blob, self.chunk_bytes))
            _prune_chain(self._chain, version, self._asked())
            msgs = self._chain_msgs(list(range(self.num_workers)), [version])
        self._send(msgs)

    def _asked(self, after: int = -1) -> set[int]:
        """Versions of the requests in flight on workers after ``after`` (call it holding ``_lock``)."""
        return {v for w, v in self._futures.values() if w > after}

    def _chain_msgs(self, route: list[int], versions: Iterable[int]) -> list[tuple[Any, ...]]:
        """As ``LocalPool._chain_msgs``: a snapshot (actors included) taken holding ``_lock``."""
        if not route:
            return []
        head, rest = self._actors[route[0]], tuple(self._actors[j] for j in route[1:])
        msgs: list[tuple[Any, ...]] = []
        for v in sorted(set(versions) & set(self._chain)):
            key, chunks = self._chain[v]
            for k, chunk in enumerate(chunks):
                msgs.append((head, key, k, len(chunks), chunk, rest))
                self.learner_sent_bytes += len(chunk)
        return msgs

    @staticmethod
    def _send(msgs: list[tuple[Any, ...]]) -> None:
        for head, *args in msgs:
            head.receive.remote(*args)

    def idle(self) -> list[int]:
        with self._lock:
            busy = {w for w, _ in self._futures.values()}
        return [i for i in range(self.num_workers) if i not in busy]

    def submit(self, worker: int, rollout_id: int, version: int, seed: int) -> None:
        with self._lock:
            ref = None if self.broadcast == "chain" else [self._refs[version]]
            fut = self._actors[worker].rollout.remote(rollout_id, self._keys[version], ref, seed)
            self._futures[fut] = (worker, version)

    def poll(self, timeout: float) -> list[Event]:
        with self._lock:
            futures = list(self._futures)
        if not futures:
            time.sleep(timeout)
            return []
        ready, _ = self._ray.wait(futures, num_returns=len(futures), timeout=timeout)
        events: list[Event] = []
        for fut in ready:
            with self._lock:
                i, version = self._futures.pop(fut)
            try:
                rollout_id, waited, data = self._ray.get(fut)
            except (self._ray.exceptions.RayActorError, self._ray.exceptions.ActorDiedError) as exc:
                events.append(("lost", i, f"ray actor died ({type(exc).__name__})"))
                actor = self._cls.remote(i, self._make, self.bcast_timeout)
                # The dead relay's chunks never reached the workers after it (every version published
                # since it died): send again from here the newest and those they were asked for. The
                # replacement and this snapshot are one step for publish: a version published after
                # it goes along the chain through the replacement.
                with self._lock:
                    self.restarts += 1
                    self._actors[i] = actor
                    route = list(range(i, self.num_workers))
                    msgs = self._chain_msgs(route, {self._newest} | self._asked(after=i))
                self._send(msgs)
                continue
            with self._lock:
                self.weight_wait_s += waited
            events.append(("done", i, rollout_id, version, data))
        return events

    def kill(self, worker: int) -> None:
        """Fault injection: kill worker ``worker``'s actor."""
        with self._lock:
            actor = self._actors[worker]
        self._ray.kill(actor, no_restart=True)

    def pids(self) -> list[int]:
        with self._lock:
            actors = list(self._actors)
        return list(self._ray.get([a.pid.remote() for a in actors]))

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
        broadcast: weight publication, ``direct`` or ``chain`` (see the module docstring).
        chunk_bytes: chunk size of the chain broadcast.
        bcast_timeout: seconds a worker waits for a published version's chunks before the run
            stops with an error.
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
        broadcast: str = "direct",
        chunk_bytes: int = CHUNK_BYTES,
        bcast_timeout: float = 300.0,
    ) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        if num_workers < 1:
            raise ValueError("num_workers must be at least 1")
        if broadcast not in BROADCASTS:
            raise ValueError(f"broadcast must be one of {BROADCASTS}, got {broadcast!r}")
        # Validates mode/staleness/kappa before any process starts.
        Coordinator(mode, rollouts_per_update, staleness, kappa, order)
        self.mode, self.R, self.S, self.kappa, self.order = mode, rollouts_per_update, staleness, kappa, order
        self.learner = learner
        self.seed = seed
        self.num_workers = num_workers
        self.max_consecutive_failures = max_consecutive_failures
        if backend == "local":
            self.pool: LocalPool | RayPool = LocalPool(
                make_worker, num_workers, context, broadcast, chunk_bytes, bcast_timeout
            )
        else:
            self.pool = RayPool(
                make_worker,
                num_workers,
                address,
                ray_num_cpus,
                ray_temp_dir,
                broadcast=broadcast,
                chunk_bytes=chunk_bytes,
                bcast_timeout=bcast_timeout,
            )
        self.backend = backend
        self.broadcast = broadcast
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
        sent0, wait0 = self.pool.learner_sent_bytes, self.pool.weight_wait_s
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
                                    # Too stale to be consumed: the buffer drops it as stale (counted
                                    # there), so it is not checked; a learner that keeps S + 2
                                    # snapshots cannot score it and would call it malformed.
                                    stale = coord.t - version > coord.S
                                    reason = validate(data) if validate is not None and not stale else None
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
                t_wait = time.perf_counter()
                with lock:
                    batch = coord.take()
                    while batch is None and not errors:
                        lock.wait(0.05)
                        if time_budget is not None and time.perf_counter() - start > time_budget:
                            break
                        batch = coord.take()
                    left = len(coord.buffer)  # consumable rollouts left after this take
                if errors:
                    raise errors[0]
                if batch is None:
                    break
                t0 = time.perf_counter()
                first_update = t0 if first_update is None else first_update
                busy0 = busy
                metrics = self.learner.update([r.data for r in batch])
                publish = False
                with lock:
                    publish = coord.updated()
                    # The dispatcher changes these under the lock: read them together, here.
                    generated, arrivals, dropped = coord.generated, dict(coord.arrivals), coord.dropped_stale
                if publish:
                    weights = self.learner.get_weights()
                    busy += time.perf_counter() - t0  # serialising the snapshot is learner work
                    with lock:
                        self.pool.publish(coord.t, weights)
                        coord.published(coord.t)
                else:
                    busy += time.perf_counter() - t0
                record: dict[str, Any] = dict(metrics or {})
                record.update(
                    step=coord.t,
                    max_staleness=max(coord.t - 1 - r.version for r in batch),
                    time_s=time.perf_counter() - start,
                    # The learner's stall before this update, and the rollouts arrived so far: the
                    # capacity model's inputs over any window of updates (steady state, not start-up).
                    wait_s=t0 - t_wait,
                    busy_s=busy - busy0,
                    generated=generated,
                    generated_by_worker=arrivals,
                    dropped_stale=dropped,
                    buffered=left,
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
        stats.broadcast = self.broadcast
        stats.learner_sent_bytes = self.pool.learner_sent_bytes - sent0
        stats.weight_wait_s = self.pool.weight_wait_s - wait0
        return stats

    def close(self) -> None:
        """Stop every worker (and Ray, if this object started it)."""
        self.pool.close()

    def __enter__(self) -> ActorLearner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
