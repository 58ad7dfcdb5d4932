"""``lynn train grpo``: GRPO post-training of a policy LM on EVMQuest, co-located or through Echo.

The trainer sits beside its loss (:mod:`lynn.agents.llm.grpo`) and its config
(:mod:`lynn.agents.llm.grpo_config`), as TRL keeps ``grpo_trainer.py`` next to ``grpo_config.py``; Echo
(:mod:`lynn.wrappers.echo`) is the library it drives workers with, and Echo imports nothing of Lynn's.
We keep our own trainer rather than TRL's ``GRPOTrainer``, which owns its generate-then-train loop and so
cannot consume groups that workers stream in at their own pace (see :mod:`lynn.agents.llm.grpo`).

Modes:

- ``colocated``: generate, then train, in this one process (strict alternation; the baseline —
  every rollout is on-policy and the learner idles while the worker generates);
- ``pull``: :class:`lynn.wrappers.echo.ActorLearner` asks ``--workers`` worker processes (or Ray
  actors) for exactly ``R`` groups at the current weights after every update (on-policy, decoupled);
- ``push_pull``: workers keep generating with the newest published weights; the learner consumes
  groups with staleness ``≤ S`` (``--staleness``) and publishes every ``κ`` updates (``--kappa``).

In both Echo modes the weights go out through the **chain broadcast** by default
(``GRPOTrainConfig.broadcast="chain"``: the learner sends each snapshot once, workers relay it; see
:mod:`lynn.wrappers.echo.actor_learner`); ``"direct"`` sends it to every worker from the learner.

The learner is :class:`lynn.agents.llm.grpo.GRPOLearner`; workers are
:class:`lynn.agents.llm.rollouts.RolloutWorker` on real ``Lynn/EVMQuest-v0`` atomic tasks, train seeds
(≥ 100000) only. Writes to ``--out``: ``checkpoints/update-N`` (model + optimiser, ``--resume``
continues from the newest), ``final/`` (a model folder ``lynn eval --agent lm`` loads),
``reward.png`` (group reward vs wall time), ``summary.json`` (learner utilisation, rollouts/s,
staleness histogram, dropped stale, lost, refused, cost). With ``eval_heldout`` the caller passes
``evaluate``, which scores ``final/`` on the held-out instances: ``lynn train grpo --eval`` passes
:func:`lynn.eval.runner.evaluate` over every atomic task, seeds from 0 (agents do not import eval/).

::

    LYNN_TORCH_THREADS=1 lynn train grpo --env Lynn/EVMQuest-v0 --model models/lm-evm2 \\
        --out runs/grpo-pp --mode push_pull --staleness 2 --workers 2 --updates 20
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from lynn.agents.llm.grpo_config import MODES, GRPOTrainConfig

__all__ = ["GRPOTrainConfig", "train_grpo"]


def _seed_base(cfg: GRPOTrainConfig, version: int) -> int:
    from lynn.lm.data import EVM_TEST_SEEDS

    # Train instances only; a resumed run continues on fresh seeds.
    return EVM_TEST_SEEDS + 1_000_000 * cfg.seed + 10_000 * version


def _latest_checkpoint(out: Path) -> Path | None:
    ck = sorted((out / "checkpoints").glob("update-*"), key=lambda p: int(p.name.split("-")[1]))
    return ck[-1] if ck else None


def _reward_png(records: list[dict[str, Any]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    if records:
        t = [r.get("time_s", 0.0) / 60 for r in records]
        y = [r.get("reward_mean", 0.0) for r in records]
        ax.plot(t, y, "o-", lw=1, ms=3, alpha=0.5, label="group reward (per update)")
        k = 5
        smooth = [
            sum(y[max(0, i - k + 1) : i + 1]) / len(y[max(0, i - k + 1) : i + 1]) for i in range(len(y))
        ]
        ax.plot(t, smooth, lw=2, label=f"rolling mean ({k})")
    ax.set_xlabel("wall time (min)")
    ax.set_ylabel("training reward (first attempt)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _worker_kwargs(cfg: GRPOTrainConfig) -> dict[str, Any]:
    """What a rollout worker is built from, the same in every mode."""
    return {
        "group_size": cfg.group_size,
        "temperature": cfg.temperature,
        "max_new_tokens": cfg.max_new_tokens,
        "tasks": cfg.tasks,
        "threads": cfg.threads,
    }


def _colocated(
    cfg: GRPOTrainConfig, learner: Any, updates: int, on_update: Any, factory: Any
) -> dict[str, Any]:
    """Strict alternation in this process: R groups at the current weights, then one update."""
    worker = factory(0)
    worker.model = learner.model  # one model: generation and training share it
    worker.gen.model = learner.model
    worker.version = learner.version
    start = time.perf_counter()
    budget_s = cfg.max_minutes * 60 if cfg.max_minutes is not None else None
    busy = 0.0
    rid = 0
    records = []
    base = _seed_base(cfg, learner.version)
    try:
        for _ in range(updates):
            if budget_s is not None and time.perf_counter() - start > budget_s:
                break
            batch = []
            for _ in range(cfg.groups_per_update):
                g = worker.rollout(base + rid)
                g["version"] = learner.version
                rid += 1
                batch.append(g)
            t0 = time.perf_counter()
            rec = dict(learner.update(batch))
            busy += time.perf_counter() - t0
            rec.update(step=learner.version, max_staleness=0, time_s=time.perf_counter() - start)
            records.append(rec)
            on_update(rec)
    finally:
        worker.close()
    wall = time.perf_counter() - start
    n = len(records)
    return {
        "mode": "colocated",
        "backend": "in-process",
        "updates": n,
        "wall_s": wall,
        "learner_busy_s": busy,
        "utilisation": busy / wall if wall else 0.0,
        "utilisation_total": busy / wall if wall else 0.0,
        "rollouts_generated": rid,
        "rollouts_consumed": rid,
        "rollouts_per_s": rid / wall if wall else 0.0,
        "dropped_stale": 0,
        "lost": 0,
        "refused": 0,
        "worker_restarts": 0,
        "staleness_hist": {0: rid},
        "metrics": records,
    }


def train_grpo(
    cfg: GRPOTrainConfig, evaluate: Callable[[str, GRPOTrainConfig], dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Run GRPO; returns the summary also written to ``out/summary.json``.

    Args:
        cfg: the run.
        evaluate: with ``cfg.eval_heldout``, ``evaluate(final_dir, cfg)`` scores the final model on held-out
            instances; its result goes in the summary as ``heldout_eval`` (``lynn train grpo --eval``
            passes one over :func:`lynn.eval.runner.evaluate`).
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from lynn.agents.llm.grpo import GRPOConfig, GRPOLearner
    from lynn.agents.llm.rollouts import WorkerFactory

    if cfg.eval_heldout and evaluate is None:
        raise ValueError(
            "eval_heldout=True needs evaluate=CALLABLE(final_dir, cfg) (lynn train grpo --eval has one)"
        )
    if cfg.mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {cfg.mode!r}")
    if cfg.env.removeprefix("lynn:") != "Lynn/EVMQuest-v0":
        raise ValueError(f"lynn train grpo supports Lynn/EVMQuest-v0 (atomic tasks), not {cfg.env}")
    if not (Path(cfg.model) / "config.json").exists():
        raise FileNotFoundError(f"no model at {cfg.model} (config.json missing)")
    torch.set_num_threads(cfg.threads)
    os.environ.setdefault("LYNN_TORCH_THREADS", str(cfg.threads))
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    gcfg = GRPOConfig(
        lr=cfg.lr,
        beta=cfg.beta,
        epsilon=cfg.epsilon,
        importance_sampling_level=cfg.importance_sampling_level,
        temperature=cfg.temperature,
        keep_versions=max(2, cfg.staleness + 2),
        seed=cfg.seed,
    )
    tok = AutoTokenizer.from_pretrained(cfg.model)
    ck = _latest_checkpoint(out) if cfg.resume else None
    ref = AutoModelForCausalLM.from_pretrained(cfg.model) if cfg.beta else None
    learner = GRPOLearner(AutoModelForCausalLM.from_pretrained(ck or cfg.model), tok, gcfg, ref_model=ref)
    prior: list[dict[str, Any]] = []
    if ck is not None:
        learner.load_state(ck)
        prior = list(learner.history)
    todo = max(0, cfg.updates - learner.version)

    bar = None
    if cfg.progress:
        from rich.progress import Progress

        bar = Progress(transient=False)
        bar.start()
        task = bar.add_task(f"grpo {cfg.mode}", total=cfg.updates, completed=learner.version)
    t_offset = prior[-1].get("time_s", 0.0) if prior else 0.0
    al = None

    def on_update(rec: dict[str, Any]) -> None:
        rec["time_s"] = rec.get("time_s", 0.0) + t_offset
        if learner.history:  # checkpoints carry the driver's clock and staleness too (resume, plots)
            learner.history[-1].update(time_s=rec["time_s"], max_staleness=rec.get("max_staleness", 0))
        if bar is not None:
            bar.update(
                task,
                completed=learner.version,
                description=f"grpo {cfg.mode} reward {rec.get('reward_mean', 0):.2f}",
            )
        if cfg.checkpoint_every and learner.version % cfg.checkpoint_every == 0:
            learner.save(
                out / "checkpoints" / f"update-{learner.version}", extra={"train_config": asdict(cfg)}
            )
        if al is not None and cfg.kill_worker_at is not None and learner.version == cfg.kill_worker_at:
            al.kill_worker(0)

    factory = WorkerFactory(cfg.model, per_worker=cfg.worker_overrides, **_worker_kwargs(cfg))
    try:
        if cfg.mode == "colocated":
            stats = _colocated(cfg, learner, todo, on_update, factory)
        else:
            from lynn.wrappers.echo.actor_learner import ActorLearner

            al = ActorLearner(
                factory,
                learner,
                mode=cfg.mode,
                num_workers=cfg.workers,
                rollouts_per_update=cfg.groups_per_update,
                staleness=cfg.staleness if cfg.mode == "push_pull" else 0,
                kappa=cfg.kappa if cfg.mode == "push_pull" else 1,
                backend=cfg.backend,
                broadcast=cfg.broadcast,
                seed=_seed_base(cfg, learner.version),
            )
            try:
                es = al.run(
                    todo,
                    time_budget=cfg.max_minutes * 60 if cfg.max_minutes is not None else None,
                    on_update=on_update,
                )
                stats = asdict(es)
                stats["loss_reports"] = list(al.loss_reports)
                stats["refusals"] = list(getattr(al, "refusals", []))
            finally:
                al.close()
    finally:
        if bar is not None:
            bar.stop()
    final = learner.save(out / "final", extra={"train_config": asdict(cfg)})
    learner.save(out / "checkpoints" / f"update-{learner.version}", extra={"train_config": asdict(cfg)})
    # lynn eval --agent lm reads the context from lynn_train.json
    src = Path(cfg.model) / "lynn_train.json"
    if src.exists():
        info = json.loads(src.read_text())
        # ... and the prompt options (slots, Done: line), without which the policy reads the plain prompt.
        from lynn.agents.llm.rollouts import prompt_options

        (final / "lynn_train.json").write_text(
            json.dumps(
                {
                    "context": info.get("context"),
                    "grpo_from": cfg.model,
                    "size": info.get("size"),
                    "config": prompt_options(cfg.model),
                }
            )
        )
    records = prior + list(stats.pop("metrics", []))
    _reward_png(records, out / "reward.png", f"GRPO {cfg.mode} (S={cfg.staleness}, N={cfg.workers})")
    rewards = [r["reward_mean"] for r in records]
    summary: dict[str, Any] = {
        "config": asdict(cfg),
        **{k: v for k, v in stats.items()},
        "updates_total": learner.version,
        "reward_first5": sum(rewards[:5]) / max(1, len(rewards[:5])),
        "reward_last5": sum(rewards[-5:]) / max(1, len(rewards[-5:])),
        "train_s_mean": sum(r.get("train_s", 0.0) for r in records) / max(1, len(records)),
        "cost": {
            "learner_cpu_s": stats.get("learner_busy_s", 0.0),
            "wall_s": stats.get("wall_s", 0.0),
            "worker_cpu_s_bound": stats.get("wall_s", 0.0) * (cfg.workers if cfg.mode != "colocated" else 0),
            "completion_tokens": sum(r.get("completion_tokens", 0.0) for r in records),
        },
        "history": records,
        "final": str(final),
        "reward_png": str(out / "reward.png"),
    }
    summary["staleness_hist"] = {str(k): v for k, v in summary.get("staleness_hist", {}).items()}
    # A run is cfg.updates updates (same seed, same steps); a time budget is only a cap, said when it binds.
    summary["capped_by_minutes"] = cfg.max_minutes is not None and learner.version < cfg.updates
    if cfg.eval_heldout and evaluate is not None:
        summary["heldout_eval"] = evaluate(str(final), cfg)
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    return summary
