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
from tests._lm_fixtures import lm_worker_context

pytestmark = pytest.mark.slow  # worker processes each boot a chain (~1-3 min in all on 2 busy cores)

#: The LM workers' reply budget per attempt. The session's tiny LM fails these instances by running to its
#: budget (3 attempts per execution), so LMPolicy's default 640 made each LM execution 1,920 generated
#: tokens; nothing asserted here depends on the budget (tokens > 0, cost = tokens x price, equal verdicts).
LM_TOKENS = 48

SPECS = [
    {"name": "steady", "kind": "oracle", "price_per_call": 1.0, "failure_rate": 0.0},
    {"name": "coin", "kind": "oracle", "price_per_call": 0.2, "failure_rate": 0.5},
]


def make_env(cache: Path, votes: int = 3, **kwargs) -> CoordinationEnv:
    scenario = {
        "workers": "lynn.agents.workers:workers_from_specs",
        # Worker processes forked from a server that imported torch, transformers and the EVMQuest genesis once
        # (as Echo's LM rollout workers are): each is still a process of its own, killed and detected the same.
        "worker_kwargs": {"specs": SPECS, "start_method": lm_worker_context()},
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
    """An LMPolicy worker (a tiny in-repo model trained in seconds) in its own process: tokens and cost measured.
    Alone in the pool: a second worker process (its own chain and sandbox) adds nothing this test checks."""
    from lynn.agents.workers import PRICES, evmquest_pool

    workers = evmquest_pool(
        target=str(tiny_lm),
        draft=str(tiny_lm),
        include=["lm-target"],
        max_new_tokens=LM_TOKENS,
        start_method=lm_worker_context(),
    )
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


@pytest.fixture(scope="module")
def tiny_draft(tiny_lm: Path, evm_demos: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A draft distilled from the tiny target (``lynn train lm --role draft``), seconds."""
    from lynn.lm.train import TrainConfig, train_lm

    out = tmp_path_factory.mktemp("tiny_draft")
    train_lm(
        TrainConfig(
            data=str(evm_demos),
            out=str(out),
            size="tiny",
            role="draft",
            teacher=str(tiny_lm),
            epochs=1,
            progress=False,
            threads=1,
        )
    )
    return out


def test_the_draft_alone_worker_and_a_target_degraded_to_it(
    tiny_lm: Path, tiny_draft: Path, tmp_path: Path
) -> None:
    """``lm-draft`` runs the draft alone in its own process at the draft's price; a degrade shock swaps
    ``lm-target``'s model for it silently (same slot, same name and card, the draft's outcomes)."""
    from lynn.agents.workers import PRICES, evmquest_pool

    workers = evmquest_pool(
        target=str(tiny_lm),
        draft=str(tiny_draft),
        include=["lm-target", "lm-draft"],
        max_new_tokens=LM_TOKENS,
        start_method=lm_worker_context(),
    )
    target, draft = workers
    assert (
        draft.spec.lm == {"model": str(tiny_draft), "max_new_tokens": LM_TOKENS} and draft.key != target.key
    )
    env = CoordinationEnv(
        scenario="real-pool",
        scenario_kwargs={
            "workers": workers,
            "categories": ("query",),
            "stream_seeds": (0,),
            "cache": str(tmp_path / "draft.jsonl"),
            "shocks": ({"step": 1, "kind": "degrade", "worker": "lm-target", "to": "lm-draft"},),
        },
    )
    try:
        obs, info = env.reset(seed=0)
        assert env.pool.names() == ["lm-target"]  # the replacement is not a slot of its own
        cache = env.scenario.result_cache
        # The calibration run booted the draft's own process and measured it alone.
        calib = env.scenario.instances(env.scenario.calibration_seeds)["query"][0]
        alone = cache.get(draft, calib, 0)
        assert draft.started and draft.pid != target.pid
        assert alone is not None and alone.error is None and alone.tokens > 0
        assert alone.cost == pytest.approx(alone.tokens * PRICES["lm-draft"][0])
        card = env.pool.capability.copy()

        first = env.task.instance
        obs, _, _, _, info = env.step(0)
        assert info["agent"] == "lm-target"
        assert info["cost"] == pytest.approx(cache.get(target, first, 0).cost)
        assert info["events"] == ["shock: lm-target degraded (now runs lm-draft's model)"]
        inst = env.task.instance
        obs, _, _, _, info = env.step(0)
        ran = cache.get(draft, inst, 0)
        assert ran is not None and info["agent"] == "lm-target"  # same name, the draft's execution
        assert info["cost"] == pytest.approx(ran.cost) and info["cost"] == pytest.approx(
            ran.tokens * PRICES["lm-draft"][0]
        )
        assert (env.pool.capability == card).all()  # silent: the card did not change
    finally:
        env.close()


def test_an_openai_endpoint_worker_over_a_real_transformers_serve(tiny_lm: Path, tmp_path: Path) -> None:
    """Worker ``openai``: LMPolicy over an OpenAI-compatible server (``transformers serve`` of the tiny
    model), next to the same model in process; greedy both, so the validator agrees on every instance."""
    from lynn.agents.workers import PRICES, evmquest_pool
    from lynn.lm.serve import ModelServer

    with ModelServer(tiny_lm) as server:
        workers = evmquest_pool(
            target=str(tiny_lm),
            include=["lm-target", "openai"],
            llm_url=server.base_url,
            llm_model=server.model,
            max_new_tokens=LM_TOKENS,
            start_method=lm_worker_context(),
        )
        env = CoordinationEnv(
            scenario="real-pool",
            scenario_kwargs={
                "workers": workers,
                "categories": ("query", "native"),
                "stream_seeds": (0,),
                "cache": str(tmp_path / "openai.jsonl"),
            },
        )
        try:
            obs, info = env.reset(seed=0)
            local, remote = workers
            slot = env.pool.names().index("openai")
            inst = env.task.instance
            obs, reward, _, _, info = env.step(slot)
            cache = env.scenario.result_cache
            out = cache.get(remote, inst, 0)
            assert out is not None and out.error is None and out.tokens > 0  # the server's usage
            assert info["agent"] == "openai" and info["cost"] == pytest.approx(
                out.tokens * PRICES["openai"][0]
            )
            # Calibration ran both workers on the same instances: the endpoint is the same greedy model.
            calib = [r for refs in env.scenario.instances((90_000,)).values() for r in refs]
            pairs = [(cache.get(local, r, 0), cache.get(remote, r, 0)) for r in [*calib, inst]]
            assert all(a is not None and b is not None for a, b in pairs)
            assert [a.success for a, _ in pairs] == [b.success for _, b in pairs]
        finally:
            env.close()
