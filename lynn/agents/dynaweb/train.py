"""``lynn train dynaweb``: the training loop (rollouts -> rows -> update), checkpoints, resume, curve, summary.

Per update ``u`` (a fixed number of them, never a time budget):

1. draw ``R`` train tasks and run ``G`` rollouts of each (:func:`~lynn.agents.dynaweb.rollouts.run_episodes`,
   all ``R·G`` in lockstep: one batched generation and one batched world-model step per imagined step);
2. draw the expert trajectories for the batch (:mod:`~lynn.agents.dynaweb.expert`, ratio ``expert_ratio``);
3. one update of :class:`~lynn.agents.dynaweb.learner.DynaWebLearner` on their rows (``expert_only``, an
   ablation: the same draws, no rollouts, the expert rows alone: BC continued with the same optimiser and
   steps, to tell what imagination adds from what the interleaved expert rows add);
4. every ``eval_every`` updates, the greedy policy on ``eval_tasks`` **train** instances of the real
   ``Lynn/LiveWeb-v0`` (real browser): the validation success of the learning curve.

Every random draw of update ``u`` comes from a stream seeded by ``(seed, u)`` (tasks, expert episodes,
sampling), so a run resumed from the checkpoint after update ``k`` repeats updates ``k+1…`` exactly: a
killed run resumed with ``--resume`` ends at the same step with the same weights as an uninterrupted one
(``tests/agents/dynaweb/test_train.py`` kills one and checks). A checkpoint is written to a temporary
folder and renamed into place, so a kill never leaves a half-written one behind.

Out folder: ``checkpoints/update-N/`` (model, tokenizer, optimiser, history; the two newest kept),
``final/`` (a model folder: ``--agent dynaweb`` or ``--agent lm`` loads it), ``curve.png``,
``summary.json`` (config, per-update history, validation points, real-interaction counts, minutes).

**Why not TRL's GRPOTrainer.** Its ``rollout_func`` returns one prompt and one completion per sample: a
multi-step web episode must then be a single sequence (every page the env returned inside the
completion, masked by ``env_mask``), i.e. a policy that reads its whole history. Our policy reads the
current page only (``LMPolicy``: goal + page cut to the context, as BC trained it); five pages of ~800
tokens do not fit the in-repo models' 1024-token context. Its advantages come from reward functions
over its own groups, so real expert steps cannot enter a batch with a fixed advantage, and its loop
has no place for the real-browser validation. What we keep from it is its loss: the rows go through
:func:`lynn.agents.llm.grpo.grpo_loss`, which is tested equal to ``GRPOTrainer._compute_loss``
(``importance_sampling_level="sequence"`` is GSPO), here too on single-step groups where both apply
(``tests/agents/dynaweb/test_learner.py``).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from lynn.agents.dynaweb.config import IMAGINED, REAL, DynaWebConfig

__all__ = ["latest_checkpoint", "train_dynaweb"]

CKPT_DIR = "checkpoints"
KEEP_CHECKPOINTS = 2
SUMMARY = "summary.json"
SMOOTH = 10  # updates averaged in the curve's trend line


def latest_checkpoint(out: str | Path) -> Path | None:
    """The newest complete ``checkpoints/update-N`` of a run folder (None when there is none)."""
    root = Path(out) / CKPT_DIR
    if not root.is_dir():
        return None
    done = [p for p in root.glob("update-*") if (p / "grpo.json").exists()]
    return max(done, key=lambda p: int(p.name.split("-")[1]), default=None)


def _context(policy: str | Path, model: Any) -> int:
    meta = Path(policy) / "lynn_train.json"
    if meta.exists():
        return int(json.loads(meta.read_text())["context"])
    return int(getattr(model.config, "max_position_embeddings", 1024))


def _train_tasks(cfg: DynaWebConfig, env: Any) -> list[str]:
    have = {s["task_id"] for s in env.starts} if cfg.imagined else {t["task_id"] for t in env.all_tasks}
    if cfg.tasks:
        missing = sorted(set(cfg.tasks) - have)
        if missing:
            where = "recorded train start pages" if cfg.imagined else "LiveWeb train tasks"
            raise ValueError(f"tasks without {where}: {', '.join(missing[:5])}")
        return sorted(cfg.tasks)
    return sorted(have)


def _real_tasks(cfg: DynaWebConfig, tasks: list[str]) -> list[str]:
    """The sampled tasks the real validation browser can run: those of ``task_file`` when one is given
    (the goals added with ``--starts``), else the bundled train tasks."""
    from lynn.envs.liveweb.liveweb_env import LiveWebEnv

    real = {t["task_id"] for t in LiveWebEnv.list_tasks(split="train", tasks=cfg.task_file or None)}
    return [t for t in tasks if t in real]


def _spread(items: list[str], k: int) -> list[str]:
    if k >= len(items):
        return list(items)
    return [items[int(i * len(items) / k)] for i in range(k)]


def _save(learner: Any, out: Path, update: int, extra: dict[str, Any], policy: str) -> Path:
    root = out / CKPT_DIR
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"update-{update}"
    tmp = root / f".tmp-update-{update}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    learner.save(tmp, extra=extra)
    _copy_meta(policy, tmp)
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    done = sorted((p for p in root.glob("update-*")), key=lambda p: int(p.name.split("-")[1]))
    for old in done[:-KEEP_CHECKPOINTS]:
        shutil.rmtree(old, ignore_errors=True)
    return final


POLICY_META = ("lynn_train.json", "lynn_web.json", "lynn_memory.json.gz", "lynn_mixture.json")


def _copy_meta(policy: str | Path, dest: Path) -> None:
    """The starting policy's files beside its weights travel with every copy: ``lynn_train.json`` (its
    context: how LMPolicy cuts pages) and, for a ranked-format policy, its format and action memory (RL
    trains the LM's weights; the memory of expert replies it is mixed with stays as it was)."""
    for name in POLICY_META:
        src = Path(policy) / name
        if src.exists():
            shutil.copy(src, dest / name)


def _curve(
    history: list[dict[str, Any]],
    evals: list[dict[str, Any]],
    path: Path,
    title: str,
    where: str = "imagined",
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    xs = [h["update"] for h in history]
    if history and history[-1]["rollout_reward"] is not None:  # None: expert_only, no rollouts
        for key, lw, ls, label in (
            ("rollout_reward", 1.2, "-", "rollout reward (mean)"),
            ("rollout_success", 1.0, ":", "rollout success"),
        ):
            ax.plot(xs, [h[key] for h in history], lw=lw, ls=ls, color="tab:blue", alpha=0.35, label=label)
        # One update is R groups: too few to read a trend from, so the mean over the last SMOOTH updates too.
        ys = [h["rollout_reward"] for h in history]
        smooth = [
            sum(ys[max(0, i - SMOOTH + 1) : i + 1]) / len(ys[max(0, i - SMOOTH + 1) : i + 1])
            for i in range(len(ys))
        ]
        ax.plot(
            xs, smooth, lw=2.0, color="tab:blue", label=f"rollout reward, mean of the last {SMOOTH} updates"
        )
    if evals:
        ex = [e["update"] for e in evals]
        ax.plot(
            ex, [e["success"] for e in evals], "o-", color="tab:red", label="real success, validation (train)"
        )
    ax.set_xlabel("update")
    ax.set_ylabel("reward / success")
    ax.set_ylim(-0.03, 1.03)
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:  # expert_only without validation: nothing to label
        ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _validate(policy: Any, envs: list[Any], tasks: list[str], max_steps: int, update: int) -> dict[str, Any]:
    from lynn.agents.dynaweb.rollouts import run_episodes

    t0 = time.perf_counter()
    trajs = run_episodes(envs, policy, [(t, 0) for t in tasks], max_steps, seed=0, source="real")
    ok = sum(t.success for t in trajs)
    return {
        "update": update,
        "success": ok / max(1, len(trajs)),
        "successes": ok,
        "episodes": len(trajs),
        "steps": sum(len(t.steps) for t in trajs),
        "per_task": {t.task_id: bool(t.success) for t in trajs},
        "seconds": time.perf_counter() - t0,
    }


def train_dynaweb(cfg: DynaWebConfig) -> dict[str, Any]:
    """Run (or resume) a DynaWeb training; returns the summary also written to ``summary.json``."""
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from lynn import zoo
    from lynn.agents.dynaweb.branches import ExpertBranches
    from lynn.agents.dynaweb.expert import ExpertBank, expert_count
    from lynn.agents.dynaweb.learner import DynaWebLearner, loss_config, trajectory_rows
    from lynn.agents.dynaweb.rollouts import make_envs, make_policy, run_episodes

    torch.set_num_threads(max(1, int(cfg.threads)))
    policy_dir = str(zoo.resolve(cfg.policy))  # "zoo:web-lm" -> its checked folder
    out = Path(cfg.out)
    ckpt = latest_checkpoint(out) if cfg.resume else None
    if not cfg.resume and latest_checkpoint(out) is not None:
        raise ValueError(
            f"{out} already holds a run's checkpoints: pass --resume to continue it, or a new --out"
        )
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    tok = AutoTokenizer.from_pretrained(policy_dir)
    model = AutoModelForCausalLM.from_pretrained(ckpt or policy_dir)
    context = _context(policy_dir, model)
    ref = AutoModelForCausalLM.from_pretrained(policy_dir) if cfg.beta else None
    mixture = _mixture_params(cfg, policy_dir, ckpt)
    learner = DynaWebLearner(
        model,
        tok,
        loss_config(cfg),
        ref_model=ref,
        iterations=cfg.iterations,
        mixture=mixture,
        mixture_lr=cfg.memory_weight_lr,
        is_truncation=cfg.is_truncation,
    )
    history: list[dict[str, Any]] = []
    evals: list[dict[str, Any]] = []
    counts = {"rollout_steps": 0, "real_rollout_steps": 0, "expert_steps_trained": 0, "validation_steps": 0}
    spent_s = 0.0
    if ckpt is not None:
        meta = learner.load_state(ckpt)
        history = list(meta.get("history", []))
        evals = list(meta.get("evals", []))
        counts.update(meta.get("counts", {}))
        spent_s = float(meta.get("seconds", 0.0))
    start = learner.version
    R, G = cfg.groups_per_update, cfg.group_size
    n_envs = R * G if cfg.imagined else cfg.real_envs
    if cfg.answer_temperature and not (Path(policy_dir) / "lynn_web.json").exists():
        # refused before any env opens: an error here must not leave browsers or world models behind
        raise ValueError("answer_temperature needs a ranked-format policy (lynn_web.json: a chooser)")
    envs = make_envs(
        cfg.env,
        n_envs,
        cfg.horizon,
        cfg.world_model,
        cfg.reward_model,
        cfg.reward_mode,
        cfg.self_assess,
        starts=cfg.starts,
        task_file=cfg.task_file,
        reward_source=cfg.reward_source,
    )
    tasks = _train_tasks(cfg, envs[0])
    val_tasks = _spread(_real_tasks(cfg, tasks), cfg.eval_tasks) if cfg.eval_every else []
    # The expert rows are every successful train episode of the data, whichever goals the rollouts draw
    # (--tasks, or goals added with --starts that have no expert episode): they are the real-data budget.
    expert = ExpertBank.load(cfg.expert_data, None, policy=policy_dir) if cfg.expert_ratio > 0 else None
    branches = ExpertBranches.load(cfg.expert_data, tasks) if cfg.branch_ratio > 0 else None
    policy = make_policy(model, tok, cfg.env, cfg.temperature, cfg.max_new_tokens, context, policy_dir)
    greedy = make_policy(model, tok, REAL, 0.0, cfg.max_new_tokens, context, policy_dir)
    if cfg.answer_temperature:
        policy.chooser.answer_temperature = cfg.answer_temperature

    def sync_weights() -> None:  # both choosers read the learned λ as it is now
        if mixture is None:
            return
        for pol in (policy, greedy):
            pol.chooser.weights = mixture.to_weights()
        policy.chooser.behaviour_scale = cfg.rollout_memory_scale

    sync_weights()
    val_envs: list[Any] = []

    def validate(update: int) -> None:
        if not val_tasks:
            return
        if not val_envs:
            val_envs.extend(make_envs(REAL, cfg.real_envs, cfg.eval_max_steps, task_file=cfg.task_file))
        e = _validate(greedy, val_envs, val_tasks, cfg.eval_max_steps, update)
        counts["validation_steps"] += e["steps"]
        evals.append(e)

    bar = None
    if cfg.progress:
        from tqdm import tqdm

        bar = tqdm(
            total=cfg.updates, initial=start, desc="dynaweb" if cfg.imagined else "live-rl", unit="upd"
        )
    try:
        if start == 0 and cfg.eval_every:
            validate(0)  # the starting (BC) policy's point on the curve
        for u in range(start, cfg.updates):
            t0 = time.perf_counter()
            rng = np.random.default_rng([cfg.seed, u])
            picked = rng.choice(len(tasks), size=R, replace=len(tasks) < R)
            episodes: list[tuple[str, int, Any]] = []
            for k in picked:
                reset_seed = int(rng.integers(2**31))
                branch = (
                    None  # the rng is only drawn from when branching is on: runs without it stay as they were
                )
                if branches is not None and tasks[int(k)] in branches and rng.random() < cfg.branch_ratio:
                    branch = branches.draw(rng, tasks[int(k)])
                episodes += [(tasks[int(k)], reset_seed, branch)] * G  # a group shares its start
            sample_seed = int(rng.integers(2**31))
            # expert_only (the ablation) draws exactly what a DynaWeb update would, then skips its rollouts
            trajs = (
                []
                if cfg.expert_only
                else run_episodes(
                    envs,
                    policy,
                    episodes,
                    cfg.horizon,
                    seed=sample_seed,
                    source="imagined" if cfg.imagined else "real",
                )
            )
            groups = [trajs[i * G : (i + 1) * G] for i in range(R)] if trajs else []
            experts = []
            if expert is not None:
                idx = expert.sample(rng, expert_count(R * G, cfg.expert_ratio))
                experts = [expert.encode(i, tok, context, cfg.max_new_tokens) for i in idx]
            rollout_s = time.perf_counter() - t0
            m = learner.step_rows(trajectory_rows(groups, experts, cfg.expert_advantage))
            sync_weights()
            steps = sum(len(t.steps) for t in trajs)
            counts["rollout_steps"] += steps
            replayed = sum(int(t.info.get("branch_real_steps", 0)) for t in trajs)
            counts["branch_replay_steps"] = counts.get("branch_replay_steps", 0) + replayed
            if not cfg.imagined:
                counts["real_rollout_steps"] += steps + replayed
            counts["expert_steps_trained"] += sum(len(t.steps) for t in experts)
            rewards = [t.reward for t in trajs]
            none = None  # expert_only: no rollouts to average
            rec = {
                "update": u + 1,
                "rollout_reward": float(np.mean(rewards)) if trajs else none,
                "rollout_success": float(np.mean([t.success for t in trajs])) if trajs else none,
                "rollout_steps": steps,
                "rollout_parse_errors": sum(t.errors for t in trajs),
                "answered": float(np.mean([bool(t.info.get("terminated")) for t in trajs]))
                if trajs
                else none,
                "zero_std_groups": (
                    float(np.mean([np.std([t.reward for t in g]) < 1e-8 for g in groups])) if groups else none
                ),
                "group_rewards": [[t.reward for t in g] for g in groups],
                "expert_trajectories": len(experts),
                "expert_tasks": [t.task_id for t in experts],
                "tasks": [tasks[int(k)] for k in picked],
                "branch_steps": [int(g[0].info.get("branch_steps", 0)) for g in groups],
                "rollout_s": rollout_s,
                **m,
            }
            history.append(rec)
            learner.history = history
            if cfg.eval_every and ((u + 1) % cfg.eval_every == 0 or u + 1 == cfg.updates):
                validate(u + 1)
            if (u + 1) % cfg.checkpoint_every == 0 or u + 1 == cfg.updates:
                extra = {
                    "evals": evals,
                    "counts": counts,
                    "seconds": spent_s + time.monotonic() - started,
                    "dynaweb_config": cfg.to_dict(),
                }
                saved = _save(learner, out, u + 1, extra, policy_dir)
                if mixture is not None:
                    mixture.save(saved)
            if bar is not None:
                bar.update(1)
                post = {"loss": f"{m['loss']:+.3f}"}
                if rec["rollout_reward"] is not None:
                    post["reward"] = f"{rec['rollout_reward']:.2f}"
                if evals:
                    post["val"] = f"{evals[-1]['success']:.2f}"
                bar.set_postfix(post)
    finally:
        if bar is not None:
            bar.close()
        for e in [*envs, *val_envs]:
            e.close()
    final = out / "final"
    if final.exists():
        shutil.rmtree(final)
    learner.model.save_pretrained(final)
    tok.save_pretrained(final)
    _copy_meta(policy_dir, final)
    if mixture is not None:  # the learned λ, read by --agent dynaweb / lm with the chooser
        mixture.save(final)
    last = history[-5:]
    summary: dict[str, Any] = {
        "config": cfg.to_dict(),
        "updates": learner.version,
        "final": str(final),
        "minutes": (spent_s + time.monotonic() - started) / 60,
        "context": context,
        "train_tasks": len(tasks),
        "validation_tasks": val_tasks,
        "real_interactions": _real_interactions(cfg, counts, expert),
        "counts": counts,
        "final_rollout_reward": _mean_of(last, "rollout_reward"),
        "final_rollout_success": _mean_of(last, "rollout_success"),
        "evals": evals,
        "history": history,
        "curve": str(out / "curve.png"),
    }
    (final / "dynaweb.json").write_text(json.dumps({k: summary[k] for k in ("config", "updates")}, indent=1))
    kind = "expert rows only" if cfg.expert_only else "DynaWeb" if cfg.imagined else "live RL"
    label = f"{kind} · ρ={cfg.expert_ratio} · G={G} · H={cfg.horizon}"
    _curve(history, evals, out / "curve.png", label, "imagined" if cfg.imagined else "real rollout")
    (out / SUMMARY).write_text(json.dumps(summary, indent=1, default=str))
    return summary


def _mean_of(history: list[dict[str, Any]], key: str) -> float | None:
    """The mean of ``key`` over ``history``; None without values (no updates, or expert_only's rows)."""
    values = [h[key] for h in history if h[key] is not None]
    return sum(values) / len(values) if values else None


def _mixture_params(cfg: DynaWebConfig, policy: str, ckpt: Path | None) -> Any:
    """The learned-λ parameters of a ranked policy (``learn_memory_weight``): from the checkpoint when
    resuming, else from the policy's own ``lynn_mixture.json`` if it has one, else λ = its memory_weight."""
    if not cfg.learn_memory_weight:
        return None
    from lynn.agents.dynaweb.mixture import MixtureParams
    from lynn.lm.web_memory import MEMORY_FILE, MIXTURE_FILE, ActionMemory, MemoryWeights

    folder = Path(policy)
    if not (folder / "lynn_web.json").exists() or not (folder / MEMORY_FILE).exists():
        raise ValueError(
            "learn_memory_weight needs a ranked-format policy with an action memory "
            f"(lynn_web.json and {MEMORY_FILE} in {policy}, e.g. zoo:web-lm)"
        )
    fmt = json.loads((folder / "lynn_web.json").read_text())
    start = None
    for where in (ckpt, folder):
        if where is not None and (where / MIXTURE_FILE).exists():
            start = MemoryWeights.load(where / MIXTURE_FILE)
            break
    templates = ActionMemory.load(folder / MEMORY_FILE).templates()
    return MixtureParams(float(fmt.get("memory_weight", 0.0)), templates, start)


def _real_interactions(cfg: DynaWebConfig, counts: dict[str, int], expert: Any) -> dict[str, Any]:
    """Real environment steps behind the trained policy (validation steps are reported apart: they
    only draw the curve; nothing trains on them and no checkpoint is chosen by them)."""
    from lynn import zoo
    from lynn.envs.worldmodel.model import open_text, stored

    wm_rows = 0
    mem = stored(Path(zoo.resolve(cfg.world_model)) / "memory.jsonl") if cfg.world_model else None
    if cfg.imagined and mem is not None and mem.exists():
        with open_text(mem) as fh:
            wm_rows = sum(1 for line in fh if line.strip())
    bank = expert.steps if expert is not None else 0
    starts = 0  # --starts: the recorded start pages of added goals (a reset, and a step, each)
    for src in cfg.starts if cfg.imagined else []:
        rows = Path(src) / "transitions.jsonl" if Path(src).is_dir() else Path(src)
        with open_text(stored(rows)) as fh:
            starts += sum(1 for line in fh if line.strip())
    return {
        "world_model_transitions": wm_rows,
        "start_page_steps": starts,
        "expert_bank_steps": bank,
        "live_rollout_steps": counts["real_rollout_steps"],
        "validation_steps": counts["validation_steps"],
        "note": "the world model's and the reward model's own data may include more runs than memory.jsonl "
        "(e.g. eps-random failures for the reward model): count those folders too",
    }


def cmd_train_dynaweb(args: Any) -> int:
    """The ``lynn train dynaweb`` command."""
    from lynn.agents.dynaweb.config import from_args

    cfg = from_args(args)
    s = train_dynaweb(cfg)
    ev = s["evals"][-1] if s["evals"] else None
    where = "imagined" if cfg.imagined else "real"
    reward = s["final_rollout_reward"]
    print(
        f"{s['updates']} updates in {s['minutes']:.1f} min; "
        + (
            f"{where} rollout reward (last 5) {reward:.3f}"
            if reward is not None
            else "no rollouts (expert_only)"
        )
        + (f"; real validation success {ev['successes']}/{ev['episodes']}" if ev else "")
        + f" -> {s['final']} (curve {s['curve']}, summary {Path(cfg.out) / SUMMARY})"
    )
    return 0


def add_train_parser(tsub: Any) -> None:
    """``lynn train dynaweb``: flags from :class:`DynaWebConfig`."""
    from lynn.agents.dynaweb.config import add_arguments

    p = tsub.add_parser(
        "dynaweb",
        help=f"DynaWeb: RL of a web policy in imagination ({IMAGINED}) with real expert steps interleaved",
    )
    add_arguments(p)
    p.set_defaults(func=cmd_train_dynaweb)
