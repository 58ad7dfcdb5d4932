"""LiveWeb test instances in the real pool (issue 16): real browsers, LiveWeb's own evaluator.

Each worker process owns its LiveWeb env (site servers and Chromium). Kept to one worker process
(one browser) per test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lynn.agents.workers import LIVEWEB, ProcessWorker, WorkerSpec, evmquest_pool
from lynn.envs.coordination import CoordinationEnv
from lynn.envs.coordination.real_pool import liveweb_families
from lynn.envs.coordination.workers_protocol import ResultCache, TaskRef
from tests._lm_fixtures import lm_worker_context

pytestmark = pytest.mark.slow  # a worker process boots a browser and the bundled sites

FAMILY = "shop.product_price"


def test_families_mix_sites_and_pair_a_stream_task_with_a_calibration_task() -> None:
    fams = liveweb_families(6)
    assert len(fams) == 6 and {f.split(".")[0] for f in fams} == {"shop", "forum", "admin"}
    for stream, calib in fams.values():
        assert stream != calib and stream.rsplit(".", 1)[0] == calib.rsplit(".", 1)[0]
    with pytest.raises(ValueError, match="unknown LiveWeb families"):
        liveweb_families(0, ("shop.no_such_family",))


def test_the_failure_injected_web_expert_runs_real_liveweb_instances() -> None:
    worker = ProcessWorker(
        WorkerSpec("web-coin", "oracle", price_per_call=1.0, failure_rate=0.5),
        start_method=lm_worker_context(),
    )
    stream, _ = liveweb_families(0, (FAMILY,))[FAMILY]
    ref = TaskRef(LIVEWEB, stream, 0, f"web:{FAMILY}")
    try:
        outs = [worker.run(ref, seed) for seed in range(4)]
    finally:
        worker.close()
    # LiveWeb's evaluator decides: the expert solves the instance, the injected failure does not.
    assert any(o.success for o in outs) and not all(o.success for o in outs), outs
    assert all(o.error is None and o.latency_s > 0 and o.cost == 1.0 and o.tokens == 0 for o in outs)
    assert worker.key_for(ref) != worker.key  # LiveWeb outcomes are cached apart from EVMQuest's


def test_an_lm_worker_in_one_mixed_evmquest_and_liveweb_stream(tmp_path: Path, tiny_lm: Path) -> None:
    cache = tmp_path / "cache.jsonl"
    kwargs = {
        "workers": "lynn.agents.workers:evmquest_pool",
        # max_new_tokens caps the EVMQuest replies, web_max_new_tokens the LiveWeb ones: the tiny LM fails the
        # query instances by running to its budget (3 attempts of LMPolicy's default 640 tokens each), and a
        # LiveWeb episode by running to its step limit (30 steps of LMPolicy's default 96 tokens each).
        "worker_kwargs": {
            "target": str(tiny_lm),
            "web_target": str(tiny_lm),
            "include": ["lm-target"],
            "max_new_tokens": 48,
            "web_max_new_tokens": 24,
            # forked from a server that imported torch and transformers once (tests/_lm_fixtures.py)
            "start_method": lm_worker_context(),
        },
        "categories": ("query",),
        "liveweb_families": (FAMILY,),
        "stream_seeds": (0,),
        "cache": str(cache),
    }
    env = CoordinationEnv(scenario="real-pool", scenario_kwargs=kwargs)
    try:
        obs, info = env.reset(seed=0)
        sc = env.scenario
        assert sc.type_names == ("query", f"web:{FAMILY}")
        assert set(sc.cards["lm-target"]) == set(sc.type_names)
        assert obs["subtask"].shape == (3,)
        kinds = set()
        for _ in range(6):
            kinds.add(sc.type_names[int(obs["subtask"][:2].argmax())])
            obs, reward, _, _, info = env.step(0)
            assert info["error"] is None and info["latency_ms"] > 0
        worker = sc.all_workers()[0]
    finally:
        env.close()
    assert kinds == {"query", f"web:{FAMILY}"}, kinds  # both envs in the one stream
    stored = ResultCache(cache)
    stream, calib = liveweb_families(0, (FAMILY,))[FAMILY]
    web = [stored.get(worker, TaskRef(LIVEWEB, t, 0, f"web:{FAMILY}"), 0) for t in (stream, calib)]
    assert all(o is not None and o.tokens > 0 and o.error is None for o in web), web  # it really generated
    assert worker.spec.web_lm == {"model": str(tiny_lm), "max_new_tokens": 24}
    assert worker.key_for(TaskRef(LIVEWEB, stream, 0, "x")) != worker.key
    # The replay runs nothing: a new pool on the same cache answers every step from it.
    env = CoordinationEnv(scenario="real-pool", scenario_kwargs=kwargs)
    try:
        env.reset(seed=0)
        for _ in range(6):
            env.step(0)
        assert not env.scenario.all_workers()[0].started
    finally:
        env.close()


def test_liveweb_families_need_a_valid_count() -> None:
    with pytest.raises(ValueError, match="liveweb must be"):
        CoordinationEnv(scenario="real-pool", scenario_kwargs={"liveweb": -1, "cache": None})
    assert evmquest_pool(include=["oracle"])[0].spec.web_lm == {}
