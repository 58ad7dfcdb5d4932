"""Thread races between the learner thread and the dispatcher thread of ``ActorLearner``.

``ActorLearner.run`` calls ``pool.publish`` (and reads the coordinator for its metrics record) on the
learner's thread, while the dispatcher thread calls ``pool.poll`` outside the run's lock (it blocks
on the workers). Each test here forces one bad interleaving on purpose, with hooks, so it fails
every time the pool (or the runner) reads state another thread changes, not once in a while:

* a worker lost mid-run: ``poll`` re-sends the chain from its replacement while ``publish`` prunes
  the chain (``KeyError: <version>`` in ``_send_chain``; seen once in
  ``test_ray_chain_push_pull_with_a_killed_relay``), on the Ray and the local backend;
* ``RayPool.publish`` lists the versions asked for (iterating the requests in flight) while ``poll``
  removes a finished one (``dictionary changed size during iteration``);
* the runner's per-update record read ``generated`` and ``generated_by_worker`` outside the lock,
  halfway through the dispatcher's ``Coordinator.arrived``.

The Ray tests use a stand-in ``ray`` module (no cluster): what is tested is the pool's bookkeeping.
"""

from __future__ import annotations

import sys
import threading
import types
from multiprocessing import Pipe
from typing import Any

import pytest

from lynn.wrappers.echo import actor_learner as al_mod
from lynn.wrappers.echo.actor_learner import ActorLearner, LocalPool, RayPool
from tests.wrappers.echo._echo_envs import VersionLearner, make_sleep_worker

CHUNK = 4


def _weights(version: int) -> dict[str, Any]:
    return {"version": version, "payload": bytes([version]) * 10}  # a few chunks of CHUNK bytes


def _in_thread(fn: Any, *args: Any) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def body() -> None:
        try:
            fn(*args)
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread, errors


# --- a stand-in for the ray module ----------------------------------------------------------------
class _ActorDied(Exception):
    pass


class _Method:
    def __init__(self, actor: _FakeActor, name: str) -> None:
        self.actor, self.name = actor, name

    def remote(self, *args: Any) -> Any:
        return self.actor.ray.call(self.actor, self.name, args)


class _FakeActor:
    def __init__(self, ray: _FakeRay, index: int) -> None:
        self.ray, self.index = ray, index
        self.receive = _Method(self, "receive")
        self.rollout = _Method(self, "rollout")
        self.pid = _Method(self, "pid")


class _FakeRay(types.ModuleType):
    """What RayPool uses of ``ray``; every actor call is recorded, rollouts finish when told."""

    def __init__(self) -> None:
        super().__init__("ray")
        self.exceptions = types.SimpleNamespace(RayActorError=_ActorDied, ActorDiedError=_ActorDied)
        self.actors: list[_FakeActor] = []
        self.received: list[tuple[_FakeActor, int, int, int, tuple[Any, ...]]] = []
        self.received_bytes = 0
        self.on_receive: Any = None  # hook: called (outside any lock of the test) on each receive
        self.futures: dict[Any, tuple[_FakeActor, tuple[Any, ...]]] = {}
        self.ready: list[Any] = []  # futures wait() reports finished
        self.dead: set[_FakeActor] = set()

    def remote(self, cls: Any) -> Any:
        ray = self

        class _Handle:
            def options(self, **opts: Any) -> Any:
                return self

            def remote(self, index: int, *args: Any) -> _FakeActor:
                actor = _FakeActor(ray, index)
                ray.actors.append(actor)
                return actor

        return _Handle()

    def call(self, actor: _FakeActor, name: str, args: tuple[Any, ...]) -> Any:
        if name == "receive":
            key, k, n, chunk, rest = args
            self.received.append((actor, key, k, n, rest))
            self.received_bytes += len(chunk)
            if self.on_receive is not None:
                self.on_receive(actor)
            return None
        fut = object()
        self.futures[fut] = (actor, args)
        return fut

    def wait(self, futures: list[Any], num_returns: int, timeout: float) -> tuple[list[Any], list[Any]]:
        ready = [f for f in futures if f in self.ready]
        return ready, [f for f in futures if f not in ready]

    def get(self, fut: Any, timeout: float | None = None) -> Any:
        actor, args = self.futures[fut]
        if actor in self.dead:
            raise _ActorDied(f"actor {actor.index} died")
        rollout_id = args[0]
        return rollout_id, 0.0, {"rollout": rollout_id}

    def put(self, obj: Any) -> Any:
        return obj

    def kill(self, actor: Any, no_restart: bool = True) -> None:
        self.dead.add(actor)

    def is_initialized(self) -> bool:
        return True

    def shutdown(self) -> None:
        pass


@pytest.fixture
def fake_ray(monkeypatch: pytest.MonkeyPatch) -> _FakeRay:
    ray = _FakeRay()
    monkeypatch.setitem(sys.modules, "ray", ray)
    monkeypatch.setattr(al_mod, "ray_init", lambda *a, **k: False)
    return ray


def _keys_received(ray: _FakeRay, actor: _FakeActor) -> dict[int, set[int]]:
    """Publication key -> chunk indices ``actor`` received from the learner."""
    out: dict[int, set[int]] = {}
    for a, key, k, _n, _rest in ray.received:
        if a is actor:
            out.setdefault(key, set()).add(k)
    return out


def _complete(ray: _FakeRay, actor: _FakeActor) -> set[int]:
    n_of = {key: n for _a, key, _k, n, _r in ray.received}
    return {key for key, ks in _keys_received(ray, actor).items() if len(ks) == n_of[key]}


# --- Ray: the lost actor's re-send against publish's pruning --------------------------------------
def test_ray_resend_after_a_lost_actor_survives_a_publish_that_prunes_the_chain(fake_ray):
    pool = RayPool(make_sleep_worker, 3, broadcast="chain", chunk_bytes=CHUNK)
    pool.publish(0, _weights(0))  # key 0
    pool.submit(2, 0, 0, 0)  # worker 2 waits on version 0: the chain keeps it
    pool.publish(1, _weights(1))  # key 1, the newest
    pool.submit(1, 1, 1, 1)
    (fut1,) = [f for f, (w, _) in pool._futures.items() if w == 1]
    fake_ray.dead.add(fake_ray.actors[1])
    fake_ray.ready = [fut1]
    fake_ray.received.clear()
    sent0, fake_ray.received_bytes = pool.learner_sent_bytes, 0

    # While poll re-sends versions 0 and 1 from worker 1's replacement, the learner publishes
    # version 2 (pruning version 1: neither the newest nor asked for any more).
    published: list[tuple[threading.Thread, list[BaseException]]] = []

    poller = threading.current_thread()

    def on_receive(actor: _FakeActor) -> None:  # the first chunk poll sends
        if threading.current_thread() is poller and not published:
            published.append(_in_thread(pool.publish, 2, _weights(2)))
            published[0][0].join(timeout=30)

    fake_ray.on_receive = on_receive
    events = pool.poll(0.01)  # before the fix: KeyError: 1
    fake_ray.on_receive = None
    thread, errors = published[0]
    thread.join(timeout=30)
    assert not thread.is_alive() and errors == []
    assert [ev[:2] for ev in events] == [("lost", 1)]

    new1 = fake_ray.actors[3]  # the replacement
    assert pool._actors[1] is new1
    # The replacement got all of versions 0 and 1 (keys 0, 1), routed on to worker 2...
    assert {0, 1} <= _complete(fake_ray, new1)
    assert all(rest == (pool._actors[2],) for a, *_, rest in fake_ray.received if a is new1)
    # ...and version 2 went the whole chain, through the replacement, never the dead actor.
    head = [(rest, key) for a, key, *_, rest in fake_ray.received if a is pool._actors[0]]
    assert head and all(key == 2 and rest == (new1, pool._actors[2]) for rest, key in head)
    assert pool.learner_sent_bytes - sent0 == fake_ray.received_bytes
    pool.close()


# --- Ray: publish lists the versions asked for while poll removes a finished request --------------
class _HookDict(dict):
    """A dict whose ``values()`` calls ``hook`` after the first item (mid-iteration)."""

    hook: Any = None

    def values(self):  # type: ignore[override]
        for n, v in enumerate(dict.values(self)):
            yield v
            if n == 0 and self.hook is not None:
                hook, self.hook = self.hook, None
                hook()


def test_ray_publish_is_not_broken_by_a_poll_that_removes_a_finished_request(fake_ray):
    pool = RayPool(make_sleep_worker, 3, broadcast="chain", chunk_bytes=CHUNK)
    pool.publish(0, _weights(0))
    for w in range(3):
        pool.submit(w, w, 0, w)
    futures = _HookDict(pool._futures)
    pool._futures = futures
    fake_ray.ready = list(futures)[:1]  # worker 0 finished

    polled: list[Any] = []

    def poll_now() -> None:  # poll on the dispatcher thread; give it time to run to its end
        thread, errors = _in_thread(lambda: polled.extend(pool.poll(0.01)))
        thread.join(timeout=2.0)
        polled.append((thread, errors))

    futures.hook = poll_now
    pool.publish(1, _weights(1))  # before the fix: RuntimeError: dictionary changed size during iteration
    thread, errors = polled.pop()
    thread.join(timeout=30)
    assert not thread.is_alive() and errors == []
    assert [ev[:2] for ev in polled] == [("done", 0)]
    assert sorted(pool._chain) == [0, 1]  # workers 1 and 2 still wait on version 0
    pool.close()


# --- local: the restarted worker's re-send against publish's pruning -------------------------------
class _FakeProc:
    exitcode = -9
    pid = 0

    def join(self, timeout: float | None = None) -> None:
        pass

    def is_alive(self) -> bool:
        return False

    def kill(self) -> None:
        pass


class _FakeUplink:
    def __init__(self) -> None:
        self.sent: list[tuple[int, Any]] = []
        self.on_put: Any = None

    def put(self, first: int, msg: Any) -> None:
        self.sent.append((first, msg))
        if self.on_put is not None:
            self.on_put()

    def close(self) -> None:
        pass


def test_local_resend_after_a_lost_worker_survives_a_publish_that_prunes_the_chain(monkeypatch):
    children: dict[int, Any] = {}

    def fake_start(self: LocalPool, i: int) -> None:  # a pipe, no process
        parent, child = Pipe()
        children[i] = child
        self._procs[i], self._pipes[i] = _FakeProc(), parent
        self._held[i] = -1

    monkeypatch.setattr(LocalPool, "_start", fake_start)
    pool = LocalPool(make_sleep_worker, 3, broadcast="chain", chunk_bytes=CHUNK)
    real_uplink = pool._uplink
    assert real_uplink is not None
    uplink = _FakeUplink()
    pool._uplink = uplink  # type: ignore[assignment]
    try:
        pool.publish(0, _weights(0))
        pool.submit(2, 0, 0, 0)  # worker 2 waits on version 0
        pool.publish(1, _weights(1))
        pool.submit(1, 1, 1, 1)
        children[1].close()  # worker 1 dies: its pipe reads EOF
        uplink.sent.clear()

        published: list[tuple[threading.Thread, list[BaseException]]] = []

        poller = threading.current_thread()

        def on_put() -> None:  # the first chunk poll sends
            if threading.current_thread() is poller and not published:
                published.append(_in_thread(pool.publish, 2, _weights(2)))
                published[0][0].join(timeout=30)

        uplink.on_put = on_put
        events = pool.poll(1.0)  # before the fix: KeyError: 1
        uplink.on_put = None
        thread, errors = published[0]
        thread.join(timeout=30)
        assert not thread.is_alive() and errors == []
        assert [ev[:2] for ev in events] == [("lost", 1)]
        resent = {(msg[0], msg[1]) for first, msg in uplink.sent if first == 1}
        n_of = {msg[0]: msg[2] for _first, msg in uplink.sent}
        for key in (0, 1):  # both whole, from the replacement on to worker 2
            assert {k for x, k in resent if x == key} == set(range(n_of[key]))
        assert all(msg[4] == (2,) for first, msg in uplink.sent if first == 1)
        assert {msg[0] for first, msg in uplink.sent if first == 0} == {2}
        assert pool.learner_sent_bytes > 0
    finally:
        real_uplink.close()
        pool.close()
        for child in children.values():
            child.close()


# --- the runner: a record's counts come from one moment --------------------------------------------
class _PausingArrivals(dict):
    """``Coordinator.arrivals``: can pause ``arrived`` between ``generated += 1`` and its own update."""

    def __init__(self, gate: _Gate) -> None:
        super().__init__()
        self.gate = gate

    def get(self, key: Any, default: Any = None) -> Any:
        if self.gate.pause_arrival.is_set() and not self.gate.paused.is_set():
            self.gate.paused.set()
            self.gate.release.wait(timeout=30)
        return dict.get(self, key, default)


class _Gate:
    def __init__(self) -> None:
        self.pause_arrival = threading.Event()
        self.paused = threading.Event()
        self.release = threading.Event()


def test_update_records_count_arrivals_consistently(monkeypatch):
    """Each record's ``generated`` is the sum of its ``generated_by_worker`` (plus refusals: none here).

    The learner thread, just before it reads the counts for update 2's record, lets the dispatcher
    stop halfway through ``Coordinator.arrived`` (``generated`` counted, the worker's arrival not yet)
    and waits until it has stopped there.
    """
    gate = _Gate()

    class PausingCoordinator(al_mod.Coordinator):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.arrivals = _PausingArrivals(gate)

    monkeypatch.setattr(al_mod, "Coordinator", PausingCoordinator)

    calls = {"n": -1}
    real_perf_counter = al_mod.time.perf_counter

    def perf_counter() -> float:
        # After update 2 returns, the learner calls perf_counter twice: its busy time, then the
        # record's time_s; the counts are read right after the second.
        if calls["n"] >= 0:
            calls["n"] += 1
            if calls["n"] == 2:
                calls["n"] = -1
                gate.pause_arrival.set()
                assert gate.paused.wait(timeout=60), "no rollout arrived"
        return real_perf_counter()

    class Learner(VersionLearner):
        def update(self, batch: list[dict[str, int]]) -> dict[str, float]:
            out = super().update(batch)
            if self.version == 2:
                calls["n"] = 0
            return out

    fake_time = types.SimpleNamespace(
        **{n: getattr(al_mod.time, n) for n in dir(al_mod.time) if not n.startswith("_")}
    )
    fake_time.perf_counter = perf_counter
    monkeypatch.setattr(al_mod, "time", fake_time)

    records: list[dict[str, Any]] = []

    def on_update(rec: dict[str, Any]) -> None:
        records.append(rec)
        if rec["step"] == 2:
            gate.release.set()

    learner = Learner(train_s=0.0)
    al = ActorLearner(
        make_sleep_worker, learner, mode="push_pull", num_workers=2, rollouts_per_update=2, context="fork"
    )
    try:
        stats = al.run(updates=4, on_update=on_update)
    finally:
        gate.release.set()
        al.close()
    assert stats.updates == 4 and gate.paused.is_set()
    for rec in records:
        assert rec["generated"] == sum(rec["generated_by_worker"].values()), rec
