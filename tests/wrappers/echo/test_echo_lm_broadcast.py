"""Weights published through the chain broadcast (ECHO-2's peer relay), local and Ray backends.

The learner sends each snapshot's chunks once, to the first worker; each worker relays them to the
next. What must hold: every worker rebuilds exactly the bytes the learner published (checked by
hash inside the worker), the version tags stay true (bounded staleness, at-most-once), the learner's
uplink carries the model once per publication (``direct`` carries it once per worker), a killed
relay does not strand the workers behind it, and a second ``run`` (versions start again at 0) never
reuses a worker's old weights. The last tests run LM rollout workers (the tiny in-repo LM on real
EVMQuest) and a :class:`~lynn.agents.llm.grpo.GRPOLearner` through the chain on both backends.
"""

from __future__ import annotations

import hashlib
import math
import os
import pickle
import time
from typing import Any

import pytest

from lynn.wrappers.echo.actor_learner import ActorLearner, LocalPool, _ChainStore, _chunks
from tests._shared import one_ray_cluster_at_a_time  # noqa: F401  (autouse: this module starts Ray)
from tests.wrappers.echo.test_echo_actor_learner import check_run

PAYLOAD = 300_000  # bytes of "weights": many chunks at CHUNK
CHUNK = 16_384


class PayloadLearner:
    """Weights = version + a payload that changes every update; workers report its hash."""

    def __init__(self, train_s: float = 0.01) -> None:
        self.version = 0
        self.train_s = train_s
        self.seen: list[tuple[int, int]] = []
        self.bad: list[tuple[int, int]] = []  # (worker, version) whose bytes did not match

    def _payload(self, version: int) -> bytes:
        return hashlib.sha256(str(version).encode()).digest() * (PAYLOAD // 32)

    def get_weights(self) -> dict[str, Any]:
        return {"version": self.version, "payload": self._payload(self.version)}

    def update(self, batch: list[dict[str, Any]]) -> dict[str, float]:
        time.sleep(self.train_s)
        for r in batch:
            self.seen.append((self.version, r["weights_version"]))
            want = hashlib.sha256(self._payload(r["weights_version"])).hexdigest()
            if r["sha"] != want:
                self.bad.append((r["worker"], r["weights_version"]))
        self.version += 1
        return {"batch": float(len(batch))}


class HashWorker:
    def __init__(self, index: int, rollout_s: float = 0.02) -> None:
        self.index, self.rollout_s = index, rollout_s * (1 + 0.5 * index)
        self.weights: dict[str, Any] | None = None

    def set_weights(self, weights: dict[str, Any]) -> None:
        self.weights = weights

    def rollout(self, seed: int) -> dict[str, Any]:
        time.sleep(self.rollout_s)
        assert self.weights is not None
        return {
            "seed": seed,
            "worker": self.index,
            "pid": os.getpid(),
            "weights_version": self.weights["version"],
            "sha": hashlib.sha256(self.weights["payload"]).hexdigest(),
        }


def make_hash_worker(index: int) -> HashWorker:
    return HashWorker(index)


def _blob_len(learner: PayloadLearner) -> int:
    return len(pickle.dumps(learner.get_weights(), protocol=pickle.HIGHEST_PROTOCOL))


# --- the pieces ---------------------------------------------------------------------------------
def test_chain_store_assembles_any_order_and_keeps_the_newest():
    blob = pickle.dumps({"w": list(range(5000))})
    parts = _chunks(blob, 1000)
    assert len(parts) == math.ceil(len(blob) / 1000) and b"".join(parts) == blob
    store = _ChainStore(keep=2)
    for k in reversed(range(len(parts))):  # out of order
        store.add(7, k, len(parts), parts[k])
    got, waited = store.wait(7, timeout=1)
    assert got == {"w": list(range(5000))} and waited < 1
    store.add(7, 0, len(parts), b"garbage")  # a re-sent chunk of a complete key changes nothing
    assert store.wait(7, timeout=1)[0] == got
    for key in (8, 9):
        store.add(key, 0, 1, pickle.dumps(key))
    assert sorted(store.complete) == [8, 9]  # keep=2
    store.add(10, 0, 2, b"x")  # half of key 10
    with pytest.raises(TimeoutError, match="publication 10 not complete"):
        store.wait(10, timeout=0.05)


def test_chain_store_keeps_an_older_partial_version_a_worker_waits_on():
    """A re-send of version 3 may race version 4's chunks: 4 completing must not discard 3's parts."""
    store = _ChainStore(keep=2)
    store.add(3, 0, 2, pickle.dumps("three")[:5])
    store.add(4, 0, 1, pickle.dumps("four"))
    blob = pickle.dumps("three")
    store.add(3, 1, 2, blob[5:])
    assert store.wait(3, timeout=1)[0] == "three"


def test_bad_broadcast_arguments_are_refused():
    with pytest.raises(ValueError, match="broadcast must be one of"):
        ActorLearner(make_hash_worker, PayloadLearner(), broadcast="tree")
    with pytest.raises(ValueError, match="chunk_bytes"):
        LocalPool(make_hash_worker, 1, broadcast="chain", chunk_bytes=0)


# --- local backend ------------------------------------------------------------------------------
@pytest.mark.parametrize("broadcast", ["direct", "chain"])
def test_local_push_pull_weights_arrive_intact_and_uplink_bytes(broadcast):
    learner = PayloadLearner()
    n = 3
    al = ActorLearner(
        make_hash_worker,
        learner,
        mode="push_pull",
        num_workers=n,
        rollouts_per_update=3,
        staleness=2,
        kappa=2,
        broadcast=broadcast,
        chunk_bytes=CHUNK,
        context="fork",
    )
    try:
        stats = al.run(updates=8)
    finally:
        al.close()
    check_run(al, learner, stats, 8, staleness=2)
    assert learner.bad == [] and stats.broadcast == broadcast
    used = {v for _, v in learner.seen}
    assert len(used) >= 3  # several published versions were really used
    m = _blob_len(learner)
    pubs = al.pool.publications
    assert pubs == 1 + 8 // 2  # version 0, then every kappa=2 updates
    if broadcast == "chain":
        assert stats.learner_sent_bytes == pubs * m  # the model leaves the learner once per version
    else:
        # Each worker gets each version it uses from the learner itself.
        assert stats.learner_sent_bytes >= n * m and stats.learner_sent_bytes % m == 0


def test_local_chain_survives_a_killed_head_relay():
    """Worker 0 heads the chain; killing it must not strand workers 1 and 2 on old versions."""
    learner = PayloadLearner(train_s=0.03)
    al = ActorLearner(
        make_hash_worker,
        learner,
        mode="push_pull",
        num_workers=3,
        rollouts_per_update=2,
        staleness=1,
        broadcast="chain",
        chunk_bytes=CHUNK,
        bcast_timeout=30,  # spawn (the default): a restart forks no threads of this process
    )
    step_at_kill: list[int] = []

    def on_update(rec: dict[str, Any]) -> None:
        if rec["step"] == 3 and not step_at_kill:
            al.kill_worker(0)
            step_at_kill.append(rec["step"])

    try:
        stats = al.run(updates=10, on_update=on_update)
    finally:
        al.close()
    check_run(al, learner, stats, 10, staleness=1)
    assert learner.bad == [] and stats.worker_restarts >= 1
    late = [(step, v) for step, v in learner.seen if step >= 8]
    assert late and all(step - v <= 1 for step, v in late)  # fresh weights kept flowing after the kill


@pytest.mark.parametrize("broadcast", ["direct", "chain"])
def test_second_run_never_reuses_old_weights(broadcast):
    learner = PayloadLearner()
    al = ActorLearner(
        make_hash_worker,
        learner,
        mode="pull",
        num_workers=2,
        rollouts_per_update=2,
        broadcast=broadcast,
        chunk_bytes=CHUNK,
        context="fork",
    )
    try:
        al.run(updates=3)
        start = learner.version
        learner.seen.clear()
        stats = al.run(updates=3)  # its versions start again at 0
    finally:
        al.close()
    assert stats.updates == 3 and learner.bad == []
    # Pull is on-policy: every rollout of run 2 used run 2's weights, never run 1's "version 0".
    assert [v for _, v in learner.seen] == [s for s, _ in learner.seen]
    assert all(v >= start for _, v in learner.seen)


# --- Ray backend --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ray_session(tmp_path_factory):
    ray = pytest.importorskip("ray")
    from tests.conftest import REPO

    os.environ["RAY_AUTH_MODE"] = "disabled"
    temp = tmp_path_factory.mktemp("ray")
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        _temp_dir=str(temp),
        runtime_env={"env_vars": {"PYTHONPATH": str(REPO), "RAY_AUTH_MODE": "disabled"}},
    )
    try:
        yield ray
    finally:
        ray.shutdown()


def test_ray_chain_push_pull_with_a_killed_relay(ray_session):
    learner = PayloadLearner(train_s=0.03)
    al = ActorLearner(
        make_hash_worker,
        learner,
        mode="push_pull",
        num_workers=3,
        rollouts_per_update=2,
        staleness=1,
        backend="ray",
        broadcast="chain",
        chunk_bytes=CHUNK,
        bcast_timeout=60,
    )
    killed: list[int] = []

    def on_update(rec: dict[str, Any]) -> None:
        if rec["step"] == 3 and not killed:
            al.kill_worker(0)
            killed.append(1)

    try:
        stats = al.run(updates=10, on_update=on_update)
    finally:
        al.close()
    check_run(al, learner, stats, 10, staleness=1)
    assert learner.bad == [] and stats.broadcast == "chain"
    assert stats.learner_sent_bytes >= al.pool.publications * _blob_len(learner)
    # The re-sends after a death go from the replacement on, never once per worker per version: the
    # newest and those the workers behind it wait on, at most one per worker.
    resent = al.pool.num_workers * stats.worker_restarts
    assert stats.learner_sent_bytes <= (al.pool.publications + resent) * _blob_len(learner)
    assert ray_session.is_initialized()


def _drain(pool: Any, n: int, timeout: float = 90.0) -> list[Any]:
    events: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(events) < n and time.monotonic() < deadline:
        events += pool.poll(0.05)
    assert len(events) == n, events
    return events


def test_ray_chain_resends_every_version_a_worker_behind_a_dead_relay_waits_on(ray_session):
    """Ray drops the calls to a dead actor, so every version published between a relay's death and
    its detection stops there. A worker behind it still waiting on an older one of them must get it
    from the replacement, not only the newest (it waited out its timeout: CI under load)."""
    from lynn.wrappers.echo.actor_learner import RayPool

    learner = PayloadLearner()
    pool = RayPool(make_hash_worker, 3, broadcast="chain", chunk_bytes=CHUNK, bcast_timeout=20)
    try:
        pool.publish(0, learner.get_weights())
        for w in range(3):
            pool.submit(w, w, 0, w)
        assert {ev[0] for ev in _drain(pool, 3)} == {"done"}
        dead = pool._actors[0]
        pool.kill(0)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # dead before anything more is sent (ray.kill is async)
            try:
                ray_session.get(dead.pid.remote(), timeout=60)
            except ray_session.exceptions.RayActorError:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the killed actor still answers")
        learner.version = 1
        pool.publish(1, learner.get_weights())  # stops at the dead head
        pool.submit(2, 10, 1, 10)  # worker 2 waits on version 1
        learner.version = 2
        pool.publish(2, learner.get_weights())  # stops there too
        pool.submit(0, 11, 2, 11)  # fails: the death is seen, worker 0 replaced
        events = _drain(pool, 2)
        done = {ev[1]: ev for ev in events if ev[0] == "done"}
        assert [ev[1] for ev in events if ev[0] == "lost"] == [0] and pool.restarts == 1
        data = done[2][4]
        assert done[2][2:4] == (10, 1) and data["weights_version"] == 1
        assert data["sha"] == hashlib.sha256(learner._payload(1)).hexdigest()
        assert pool.learner_sent_bytes <= (pool.publications + 2) * _blob_len(learner)
        pool.submit(0, 12, 2, 12)  # the replacement has the newest version
        (ev,) = _drain(pool, 1)
        assert ev[0] == "done" and ev[4]["weights_version"] == 2
    finally:
        pool.close()


# --- LM rollout workers through the chain ---------------------------------------------------------
def _lm_run(tiny_lm, backend: str, num_workers: int) -> tuple[Any, Any, Any]:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from lynn.agents.llm.grpo import GRPOConfig, GRPOLearner
    from lynn.agents.llm.rollouts import WorkerFactory
    from tests._lm_fixtures import EVM_TASKS, lm_worker_context

    learner = GRPOLearner(str(tiny_lm), config=GRPOConfig(lr=1e-3, keep_versions=4), threads=1)
    factory = WorkerFactory(str(tiny_lm), group_size=2, max_new_tokens=64, tasks=EVM_TASKS, threads=1)
    al = ActorLearner(
        factory,
        learner,
        mode="push_pull",
        num_workers=num_workers,
        rollouts_per_update=2,
        staleness=1,
        backend=backend,
        broadcast="chain",
        chunk_bytes=256 * 1024,
        seed=100_000,
        bcast_timeout=120,
        **({"context": lm_worker_context()} if backend == "local" else {}),
    )
    try:
        stats = al.run(updates=3)
    finally:
        al.close()
    return al, learner, stats


def _check_lm(al, learner, stats) -> None:
    assert stats.updates == 3 and learner.version == 3 and stats.refused == 0
    coord = al.coordinator
    ids = [rid for rid, _, _ in coord.consumed]
    assert len(ids) == len(set(ids)) == 6
    assert all(step - version <= 1 for _, version, step in coord.consumed)
    # The learner's own version tags agree with the coordinator's (the worker really loaded them).
    assert all(h["version_lag_max"] <= 1 for h in learner.history)
    assert all(math.isfinite(h["loss"]) for h in learner.history)
    # Once per version. Not publications x one snapshot's size: a pickled tensor names its storage by
    # its memory address, so two snapshots' sizes differ by a byte or two now and then (CI saw 2).
    state_bytes = len(pickle.dumps(learner.get_weights(), protocol=pickle.HIGHEST_PROTOCOL))
    assert stats.learner_sent_bytes == al.pool.published_bytes
    assert abs(al.pool.published_bytes - al.pool.publications * state_bytes) < 64 * al.pool.publications


def test_lm_workers_local_chain(tiny_lm):
    al, learner, stats = _lm_run(tiny_lm, "local", 2)
    _check_lm(al, learner, stats)


def test_lm_workers_ray_chain(tiny_lm, ray_session):
    al, learner, stats = _lm_run(tiny_lm, "ray", 2)
    _check_lm(al, learner, stats)
