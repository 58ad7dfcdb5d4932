"""Echo with LM rollouts: GRPO groups from LMPolicy on real EVMQuest episodes through ActorLearner.

The same properties the CartPole tests check (bounded staleness, at-most-once consumption, a killed
worker does not stop the run) must hold when the rollouts are version-tagged LM groups and the learner
is :class:`lynn.agents.llm.grpo.GRPOLearner`; a worker that returns a malformed group is refused with a
log line and never reaches the loss. The model is the session's tiny LM (tests/_lm_fixtures.py).
"""

from __future__ import annotations

import json
import logging
import math

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from tests._lm_fixtures import EVM_TASKS, lm_worker_context  # noqa: E402

WORKER_KW = {"group_size": 2, "max_new_tokens": 96, "tasks": EVM_TASKS, "threads": 1}


class CorruptingFactory:
    """Workers whose rollout number ``bad_at`` (per worker) comes back malformed (a NaN reward)."""

    def __init__(self, model: str, bad_at: int = 1) -> None:
        self.model, self.bad_at = model, bad_at

    def __call__(self, index: int):
        from lynn.agents.llm.rollouts import RolloutWorker

        worker = RolloutWorker(self.model, index=index, **WORKER_KW)
        inner, count = worker.rollout, [0]

        def rollout(seed: int):
            group = inner(seed)
            count[0] += 1
            if count[0] == self.bad_at + 1:
                group["completions"][0]["reward"] = math.nan
            return group

        worker.rollout = rollout
        return worker


def _learner(tiny_lm, keep: int = 4):
    from lynn.agents.llm.grpo import GRPOConfig, GRPOLearner

    return GRPOLearner(str(tiny_lm), config=GRPOConfig(lr=1e-4, keep_versions=keep), threads=1)


def test_push_pull_lm_rollouts_bounded_staleness_at_most_once_and_killed_worker(tiny_lm):
    from lynn.agents.llm.rollouts import WorkerFactory
    from lynn.wrappers.echo.actor_learner import ActorLearner

    learner = _learner(tiny_lm)
    S = 1
    al = ActorLearner(
        WorkerFactory(str(tiny_lm), **WORKER_KW),
        learner,
        mode="push_pull",
        num_workers=2,
        rollouts_per_update=2,
        staleness=S,
        backend="local",
        seed=100_000,
        context=lm_worker_context(),
    )
    killed = []

    def on_update(rec):
        if rec["step"] == 1 and not killed:
            al.kill_worker(0)  # it is generating (push_pull keeps workers busy): its group is lost
            killed.append(True)

    try:
        stats = al.run(updates=4, on_update=on_update)
    finally:
        al.close()
    assert stats.updates == 4 and learner.version == 4
    coord = al.coordinator
    ids = [rid for rid, _, _ in coord.consumed]
    assert len(ids) == len(set(ids)) == 8  # at most once, R per update
    assert all(step - version <= S for _, version, step in coord.consumed)
    assert max(stats.staleness_hist) <= S
    # The learner's own view agrees: the version tag inside each group is the one it was sent.
    assert all(h["version_lag_max"] <= S for h in learner.history)
    assert stats.worker_restarts >= 1 and stats.lost == len(al.loss_reports) <= 1
    assert all(math.isfinite(h["loss"]) for h in learner.history)


def test_malformed_lm_rollout_is_refused_with_a_log_line(tiny_lm, caplog):
    from lynn.wrappers.echo.actor_learner import ActorLearner

    learner = _learner(tiny_lm)
    al = ActorLearner(
        CorruptingFactory(str(tiny_lm), bad_at=1),
        learner,
        mode="pull",
        num_workers=1,
        rollouts_per_update=2,
        backend="local",
        seed=100_000,
        context=lm_worker_context(),
    )
    with caplog.at_level(logging.WARNING, logger="lynn.echo"):
        try:
            stats = al.run(updates=2)
        finally:
            al.close()
    assert stats.updates == 2 and stats.refused == 1
    assert stats.rollouts_consumed == 4  # pull mode asked for a replacement
    lines = [r.getMessage() for r in caplog.records if r.name == "lynn.echo"]
    assert any("refused malformed rollout" in m and "not a finite number" in m for m in lines), lines


def test_heldout_seeds_are_refused_by_the_worker(tiny_lm):
    from lynn.agents.llm.rollouts import RolloutWorker

    w = RolloutWorker(str(tiny_lm), **WORKER_KW)
    try:
        with pytest.raises(ValueError, match="held-out"):
            w.rollout(5)
        g = w.rollout(100_003)
    finally:
        w.close()
    assert g["version"] == 0 and len(g["completions"]) == 2 and g["task_id"] in EVM_TASKS
    assert all(c["ids"] and 0.0 <= c["reward"] <= 1.0 for c in g["completions"])


def test_train_grpo_colocated_checkpoints_and_resume(tiny_lm, tmp_path):
    from lynn.agents.llm.grpo_trainer import GRPOTrainConfig, train_grpo

    kw = dict(
        model=str(tiny_lm),
        out=str(tmp_path / "run"),
        mode="colocated",
        groups_per_update=2,
        group_size=2,
        max_new_tokens=96,
        tasks=EVM_TASKS,
        checkpoint_every=1,
        progress=False,
    )
    s1 = train_grpo(GRPOTrainConfig(updates=2, **kw))
    assert s1["updates_total"] == 2 and (tmp_path / "run" / "checkpoints" / "update-2").exists()
    s2 = train_grpo(GRPOTrainConfig(updates=3, resume=True, **kw))
    assert s2["updates"] == 1 and s2["updates_total"] == 3 and len(s2["history"]) == 3
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["staleness_hist"] == {"0": 2}
    assert (tmp_path / "run" / "reward.png").stat().st_size > 1000
    assert (tmp_path / "run" / "final" / "config.json").exists()
    # The trained policy keeps the base's prompt options (lynn eval reads them from lynn_train.json).
    final_info = json.loads((tmp_path / "run" / "final" / "lynn_train.json").read_text())
    assert final_info["config"] == {"slots": False, "history": False}
