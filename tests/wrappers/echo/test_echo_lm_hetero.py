"""Heterogeneous LM workers and the capacity model's steady-state inputs.

Workers of one GRPO run may differ in how they decode (``gen_batch``: replies per ``generate`` call)
or in their reply budget (``max_new_tokens``), never in temperature or group size. The learner reports
each worker's seconds per group (its ``μ_i``), and ActorLearner's update records carry the learner's
wait, busy time and the rollouts arrived so far, from which ``benchmarks/bench_grpo.py`` measures the
utilisation over a steady-state window and predicts it with :mod:`lynn.wrappers.echo.capacity`.
"""

from __future__ import annotations

import importlib.util
import math

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from tests._lm_fixtures import EVM_TASKS, lm_worker_context  # noqa: E402
from tests.conftest import REPO  # noqa: E402

WORKER_KW = {"group_size": 2, "max_new_tokens": 48, "tasks": EVM_TASKS, "threads": 1}


def _bench():
    path = REPO / "benchmarks" / "bench_grpo.py"
    spec = importlib.util.spec_from_file_location("bench_grpo_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gen_batch_decodes_the_same_replies_in_smaller_calls(tiny_lm):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from lynn.agents.llm.rollouts import IdGenerator

    model = AutoModelForCausalLM.from_pretrained(tiny_lm)
    tok = AutoTokenizer.from_pretrained(tiny_lm)
    prompts = [[{"role": "user", "content": "Deploy an ERC20 token."}]] * 3
    calls = []
    inner = model.generate

    def counting(*a, **kw):
        calls.append(kw["input_ids"].shape[0])
        return inner(*a, **kw)

    model.generate = counting
    whole = IdGenerator(model, tok).generate(prompts, max_new_tokens=24)
    one = IdGenerator(model, tok, batch_size=1).generate(prompts, max_new_tokens=24)
    two = IdGenerator(model, tok, batch_size=2).generate(prompts, max_new_tokens=24)
    assert calls == [3, 1, 1, 1, 2, 1]
    ids = [g.stats["completion_ids"] for g in whole]
    assert ids == [g.stats["completion_ids"] for g in one] == [g.stats["completion_ids"] for g in two]
    assert [g.text for g in whole] == [g.text for g in one]
    # Sampling: one seed gives one stream, so a chunked worker is reproducible too.
    a = IdGenerator(model, tok, batch_size=1).generate(prompts, max_new_tokens=24, temperature=1.0, seed=7)
    b = IdGenerator(model, tok, batch_size=1).generate(prompts, max_new_tokens=24, temperature=1.0, seed=7)
    assert [g.stats["completion_ids"] for g in a] == [g.stats["completion_ids"] for g in b]
    with pytest.raises(ValueError, match="batch_size"):
        IdGenerator(model, tok, batch_size=0)


def test_worker_factory_per_worker_settings(tiny_lm):
    from lynn.agents.llm.rollouts import WorkerFactory

    with pytest.raises(ValueError, match="temperature cannot differ"):
        WorkerFactory(str(tiny_lm), per_worker=[{}, {"temperature": 0.5}], **WORKER_KW)
    with pytest.raises(ValueError, match="group_size cannot differ"):
        WorkerFactory(str(tiny_lm), per_worker=[{"group_size": 4}], **WORKER_KW)
    f = WorkerFactory(str(tiny_lm), per_worker=[{"gen_batch": 1}, {"max_new_tokens": 16}], **WORKER_KW)
    assert f.settings(0)["gen_batch"] == 1 and f.settings(0)["max_new_tokens"] == 48
    assert f.settings(1)["max_new_tokens"] == 16 and "gen_batch" not in f.settings(1)
    assert f.settings(2) == f.settings(0)  # cycles
    assert WorkerFactory(str(tiny_lm), **WORKER_KW).settings(5) == WORKER_KW
    w = f(1)
    try:
        assert w.index == 1 and w.policy.max_new_tokens == 16 and w.gen.batch_size is None
        g = w.rollout(100_001)
        assert all(len(c["ids"]) <= 16 for c in g["completions"]) and g["worker"] == 1
    finally:
        w.close()


def test_heterogeneous_push_pull_reports_each_workers_rate_and_the_learners_wait(tiny_lm):
    from lynn.agents.llm.grpo import GRPOConfig, GRPOLearner
    from lynn.agents.llm.rollouts import WorkerFactory
    from lynn.wrappers.echo.actor_learner import ActorLearner

    learner = GRPOLearner(str(tiny_lm), config=GRPOConfig(lr=1e-4, keep_versions=6), threads=1)
    factory = WorkerFactory(str(tiny_lm), per_worker=[{"gen_batch": 1}, {}], **WORKER_KW)
    al = ActorLearner(
        factory,
        learner,
        mode="push_pull",
        num_workers=2,
        rollouts_per_update=2,
        staleness=4,
        backend="local",
        seed=100_000,
        context=lm_worker_context(),
    )
    try:
        stats = al.run(updates=4)
    finally:
        al.close()
    assert stats.updates == 4
    recs = stats.metrics
    assert [r["step"] for r in recs] == [1, 2, 3, 4]
    # generated is the count of arrivals when the update finished: monotone, and at least R per update.
    gen = [r["generated"] for r in recs]
    assert gen == sorted(gen) and all(g >= 2 * (i + 1) for i, g in enumerate(gen))
    assert gen[-1] <= stats.rollouts_generated
    drops = [r["dropped_stale"] for r in recs]
    assert drops == sorted(drops) and drops[-1] <= stats.dropped_stale
    # Arrived >= consumed + dropped + left in the buffer at the take (more may arrive during the update).
    assert all(r["generated"] >= 2 * r["step"] + r["dropped_stale"] + r["buffered"] for r in recs)
    assert all(r["buffered"] >= 0 for r in recs)
    assert all(r["wait_s"] >= 0 and r["busy_s"] >= r["train_s"] for r in recs)
    assert sum(r["busy_s"] for r in recs) == pytest.approx(stats.learner_busy_s, rel=1e-6)
    seen = {w for h in learner.history for w in h.get("rollout_s_by_worker", {})}
    assert seen <= {"0", "1"} and seen
    for h in learner.history:
        per = h["rollout_s_by_worker"]
        assert all(d > 0 for d in per.values())
        assert min(per.values()) - 1e-9 <= h["rollout_s_mean"] <= max(per.values()) + 1e-9


def _history(train_s, gap_s, n, per_worker, start=30.0, backlog=3):
    """A synthetic push_pull history: a start-up backlog (no wait) then a learner that waits gap_s."""
    t, out, gen = start, [], backlog
    for k in range(n):
        wait = 0.0 if k < backlog // 2 else gap_s
        t += wait + train_s
        gen += 2
        out.append(
            {
                "step": k + 1,
                "time_s": t,
                "train_s": train_s,
                "busy_s": train_s,
                "wait_s": wait,
                "generated": gen,
                "rollout_s_mean": sum(per_worker) / len(per_worker),
                "rollout_s_by_worker": {str(i): d for i, d in enumerate(per_worker)},
            }
        )
    return out


def test_bench_steady_state_window_leaves_out_the_start_up_backlog():
    from lynn.wrappers.echo.capacity import predicted_utilisation

    bench = _bench()
    hist = _history(train_s=4.0, gap_s=6.0, n=20, per_worker=[10.0, 20.0])
    assert bench.steady_window(hist) == (5, 20)
    assert bench.steady_window(hist[:4]) == (2, 4)  # at least 2 updates left out
    summ = {
        "history": hist,
        "train_s_mean": 4.0,
        "publishes": 20,
        "weight_wait_s": 0.0,
    }
    cols = bench.capacity_columns(summ, workers=2, groups=2, kappa=1, mode="push_pull")
    assert cols["steady_updates"] == "6-20"
    # In the window every update waits 6 s and trains 4 s: U = 0.4 exactly.
    assert cols["steady_measured_U"] == pytest.approx(0.4)
    assert cols["steady_mu_i"] == [pytest.approx(0.1), pytest.approx(0.05)]
    assert cols["steady_predicted_U"] == pytest.approx(
        round(predicted_utilisation([0.1, 0.05], 4.0, 0.0, 2, 1), 3)
    )
    # Two arrivals per 10 s update: the observed rate is 0.2 groups/s.
    assert cols["steady_sum_mu_obs"] == pytest.approx(0.2)
    assert cols["steady_predicted_U_obs"] == pytest.approx(round(min(1, 4.0 / (2 / 0.2)), 3))
    # Without the new record fields (runs before this pass) only the whole-run columns come back.
    old = {**summ, "history": [{k: v for k, v in h.items() if k != "busy_s"} for h in hist]}
    assert "steady_measured_U" not in bench.capacity_columns(old, 2, 2, 1, "push_pull")
    assert not math.isnan(bench.capacity_columns(old, 2, 2, 1, "push_pull")["predicted_U"])


def test_bench_cost_aware_activation_picks_the_cheapest_eligible_set(tmp_path, capsys):
    import argparse
    import json

    bench = _bench()
    # Worker types: 10 s, 40 s and 5 s per group; T_train 6 s; S=4, kappa=1: condition (3) allows
    # d <= (4 * 6 - 0) / 2 = 12 s, so the 40 s type is left off; inequality (1) needs 2 / 6 groups/s.
    hist = _history(train_s=6.0, gap_s=0.0, n=12, per_worker=[10.0, 40.0, 5.0])
    summ = {"history": hist, "train_s_mean": 6.0, "publishes": 12, "weight_wait_s": 0.0}
    for name in ("push_pull-4", "activated"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary.json").write_text(
            json.dumps(
                {
                    **summ,
                    "updates": 12,
                    "wall_s": 100.0,
                    "utilisation": 1.0,
                    "rollouts_per_s": 0.3,
                    "staleness_hist": {},
                    "dropped_stale": 0,
                    "lost": 0,
                    "refused": 0,
                    "reward_first5": 0.0,
                    "reward_last5": 0.0,
                }
            )  # fmt: skip
        )
    per_worker = [{}, {"gen_batch": 1}, {"max_new_tokens": 160}]
    args = argparse.Namespace(
        out=str(tmp_path), configs=["push_pull:4"], groups=2, kappa=1, steady_from=0.25, copies=2,
        costs=None, reanalyse=True, eval=False, workers=2,
    )  # fmt: skip
    [row] = bench.activation(args, per_worker)
    info = json.loads((tmp_path / "activation.json").read_text())
    assert info["required_sum_mu"] == pytest.approx(2 / 6, abs=1e-4)
    assert all(name.startswith('{"gen_batch": 1}') for name in info["excluded_too_slow"])
    assert len(info["excluded_too_slow"]) == 2
    assert info["chosen"] == ['{"max_new_tokens": 160}#0', '{"max_new_tokens": 160}#1'] and info["cost"] == 2
    assert row["config"] == "activated" and row["workers"] == 2 and "predicted_U_from_measurement" in row
    # A dearer fast type: two 10 s workers and one 5 s worker (cost 1 + 1 + 3) beat two 5 s ones (6).
    args.costs = "1,1,3"
    bench.activation(args, per_worker)
    info = json.loads((tmp_path / "activation.json").read_text())
    assert sorted(info["chosen"]) == ['{"max_new_tokens": 160}#0', "{}#0", "{}#1"] and info["cost"] == 5
    assert info["feasible"] and info["chosen_sum_mu"] == pytest.approx(0.4)
