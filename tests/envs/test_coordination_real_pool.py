"""The real-pool scenario: real EVMQuest instances routed to real worker processes (issue 16).

Workers here are the EVMQuest oracle behind injected failure rates, each in its own process with its
own chain: success is the task validator's verdict, latency is measured, results are cached.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from lynn.agents.linucb import LinUCBAgent
from lynn.envs.coordination import CoordinationEnv
from lynn.envs.coordination.workers_protocol import ResultCache

pytestmark = pytest.mark.slow  # worker processes each boot a chain (~1-3 min in all on 2 busy cores)

SPECS = [
    {"name": "steady", "kind": "oracle", "price_per_call": 1.0, "failure_rate": 0.0},
    {"name": "coin", "kind": "oracle", "price_per_call": 0.2, "failure_rate": 0.5},
]


def make_env(cache: Path, votes: int = 3, **kwargs) -> CoordinationEnv:
    scenario = {
        "workers": "lynn.agents.workers:workers_from_specs",
        "worker_kwargs": {"specs": SPECS},
        "categories": ("query", "wrap"),
        "tasks_per_category": 1,
        "stream_seeds": (0, 1),
        "cache": str(cache),
        **kwargs,
    }
    return CoordinationEnv(scenario="real-pool", scenario_kwargs=scenario, votes=votes)


def run_stream(env: CoordinationEnv, steps: int, seed: int = 0) -> list[dict]:
    agent = LinUCBAgent(env)
    obs, info = env.reset(seed=seed)
    agent.reset(seed=seed)
    rows = []
    for _ in range(steps):
        action = agent.act(obs, info)
        obs, reward, terminated, truncated, info = env.step(action)
        agent.observe(action, reward, obs, terminated, truncated, info)
        rows.append(
            {k: info[k] for k in ("agent", "regret", "cost", "latency_ms", "events", "error")} | {"r": reward}
        )
    return rows


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory):
    cache = tmp_path_factory.mktemp("real_pool") / "cache.jsonl"
    env = make_env(cache)
    rows = run_stream(env, 12)
    yield env, cache, rows
    env.close()


def test_votes_are_real_executions_and_the_majority_decides(live) -> None:
    env, cache, rows = live
    sc = env.scenario
    coin = next(w for w in sc.all_workers() if w.name == "coin")
    steady = next(w for w in sc.all_workers() if w.name == "steady")
    assert steady.started and coin.started and coin.calls >= 1
    stored = ResultCache(cache)
    for refs in sc.instances(sc.stream_seeds).values():
        for ref in refs:
            outs = [stored.get(coin, ref, j) for j in range(3)]
            assert all(o is not None for o in outs)  # exact regret ran every worker, 3 votes each
            assert all(o.latency_s > 0 for o in outs)
            # The stochastic worker's executions differ by seed; the deterministic one is stored once.
            assert stored.get(steady, ref, 2) is stored.get(steady, ref, 0)
    # Across all instances, the injected 50% failures show up in the coin worker's executions.
    every = [
        stored.get(coin, r, j).success
        for refs in sc.instances(sc.stream_seeds).values()
        for r in refs
        for j in range(3)
    ]
    assert 0 < sum(every) < len(every)
    # The env's per-worker outcome on the current instance is the majority of its three executions.
    q = sc.expected(env.pool, env.task, 3)
    for slot, w in enumerate(sc._slot_worker):
        outs = [stored.get(w, env.task.instance, j) for j in range(3)]
        assert q[slot] == float(sum(o.success for o in outs) >= 2)
    # The steady oracle never fails; the router's costs are the workers' prices times the votes.
    assert {r["cost"] for r in rows if r["agent"] == "steady"} <= {3.0}
    assert {round(r["cost"], 6) for r in rows if r["agent"] == "coin"} <= {0.6}
    assert all(0.0 <= r["regret"] <= 1.0 for r in rows)


def test_cached_replay_is_deterministic_and_runs_nothing(live) -> None:
    env, cache, rows = live
    start = time.perf_counter()
    replay = make_env(cache)
    again = run_stream(replay, 12)
    elapsed = time.perf_counter() - start
    assert again == rows
    assert not any(w.started for w in replay.scenario.all_workers())  # nothing ran
    assert replay.scenario.result_cache.misses == 0
    assert elapsed < 20.0
    replay.close()


def test_a_kill_shock_on_the_replay_is_reported_and_routed_around(live) -> None:
    env, cache, rows = live
    replay = make_env(cache, shocks=({"step": 4, "kind": "kill", "worker": "steady"},))
    got = run_stream(replay, 12)
    assert got[:3] == rows[:3]
    assert got[3]["events"] == ["shock: steady process killed (unavailable)"]
    assert all(r["agent"] == "coin" for r in got[4:])
    replay.close()


def test_a_killed_worker_process_is_reported_and_routed_around(live) -> None:
    env, cache, rows = live
    steady = next(w for w in env.scenario.all_workers() if w.name == "steady")
    slot, other = env.pool.names().index("steady"), env.pool.names().index("coin")
    os.kill(steady.pid, signal.SIGKILL)  # a real fault, from outside the env
    steady.proc.wait(timeout=10)
    obs, _, _, _, info = env.step(other)
    assert "unavailable: steady process died" in info["events"]  # the pool's heartbeat saw it
    assert obs["action_mask"][slot] == 0 and obs["candidates"][slot, 5] == 0.0
    obs, reward, _, _, info = env.step(slot)
    assert reward == 0.0 and "offline (its process died)" in info["error"]
    agent = LinUCBAgent(env)
    agent.reset(seed=1)
    for _ in range(5):
        action = agent.act(obs, info)
        obs, reward, _, _, info = env.step(action)
        agent.observe(action, reward, obs, False, False, info)
        assert action != slot and info["agent"] == "coin" and info["error"] is None


def test_bad_configuration_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="module:callable"):
        make_env(tmp_path / "c.jsonl", workers="no-colon").reset(seed=0)
    with pytest.raises(ValueError, match="unknown EVMQuest categories"):
        make_env(tmp_path / "c.jsonl", categories=("nope",))
    with pytest.raises(ValueError, match="overlap"):
        make_env(tmp_path / "c.jsonl", calibration_seeds=(0,))


def test_lm_policy_worker_in_its_own_process(tiny_lm: Path, tmp_path: Path) -> None:
    """An LMPolicy worker (a tiny in-repo model trained in seconds) next to the oracle: tokens and cost measured."""
    from lynn.agents.workers import PRICES, evmquest_pool

    workers = evmquest_pool(target=str(tiny_lm), draft=str(tiny_lm), include=["lm-target", "oracle"])
    env = CoordinationEnv(
        scenario="real-pool",
        scenario_kwargs={
            "workers": workers,
            "categories": ("query",),
            "stream_seeds": (0,),
            "cache": str(tmp_path / "lm.jsonl"),
        },
    )
    try:
        obs, info = env.reset(seed=0)
        lm = workers[0]
        assert lm.started and lm.deterministic  # the calibration run booted its process
        inst = env.task.instance
        slot = env.pool.names().index("lm-target")
        obs, reward, _, _, info = env.step(slot)
        out = env.scenario.result_cache.get(lm, inst, 0)
        assert out is not None and out.error is None and out.tokens > 0 and out.latency_s > 0
        assert out.cost == pytest.approx(out.tokens * PRICES["lm-target"][0])
        assert info["agent"] == "lm-target" and info["cost"] == pytest.approx(out.cost)
        assert reward == float(out.success)
    finally:
        env.close()
    assert not any(w.started for w in workers)
