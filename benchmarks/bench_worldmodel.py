"""World-model benchmark: quality on held-out transitions, rollouts, reward model, speed (one run).

    .venv/bin/python benchmarks/bench_worldmodel.py --train /work/data/web_train --test /work/data/test_web \\
        --model models/worldmodel-web --out benchmarks/figures

Prints Markdown tables:

1. one-step quality of *copy*, *nearest neighbour*, the *page memory* and (``--model``) the learned LM
   with and without the page memory, on held-out instances and held-out templates
   (:mod:`lynn.envs.worldmodel.data`; figures of :mod:`lynn.envs.worldmodel.metrics`);
2. line F1 by step when the expert's real actions are rolled through each model from the real start
   page (imagined pages fed back), with a PNG of it;
3. the reward model (trained here on the same train split; with ``--eps``, also with the ε-random
   expert runs' real failures) on both held-out sets (plus the ε runs of those sets): accuracy and AUC,
   and the expert's recorded test episodes replayed in imagination: imagined vs real success;
4. imagined steps/s, one env and ``step_batch`` over N envs, beside LiveWeb's live steps/s replaying the
   same expert actions in Chromium (``--live-episodes``), and the goal ratio batched / live.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any


def _speed(
    model: Any, starts: str, rows: list[dict[str, Any]], n_envs: int, max_episodes: int
) -> dict[str, float]:
    """Imagined steps/s replaying the expert's actions: one env at a time, then N envs per batch."""
    from lynn.envs.worldmodel.data import episodes
    from lynn.envs.worldmodel.worldmodel_env import WebWorldModelEnv

    eps = [e for e in episodes(rows) if len(e) > 1][:max_episodes]
    env = WebWorldModelEnv(world_model=model, starts=starts, split=None, max_steps=30)
    t, n = time.perf_counter(), 0
    for ep in eps:
        env.reset(options={"task_id": ep[0]["task_id"]})
        for r in ep:
            env.step(r["action"])
            n += 1
    single = n / (time.perf_counter() - t)
    envs = [
        WebWorldModelEnv(world_model=model, starts=starts, split=None, max_steps=30) for _ in range(n_envs)
    ]
    t, n = time.perf_counter(), 0
    for i in range(0, len(eps), n_envs):
        group = eps[i : i + n_envs]
        for env_i, ep in zip(envs, group, strict=False):
            env_i.reset(options={"task_id": ep[0]["task_id"]})
        for step in range(max(len(ep) for ep in group)):
            live = [(envs[j], ep[step]["action"]) for j, ep in enumerate(group) if step < len(ep)]
            WebWorldModelEnv.step_batch([e for e, _ in live], [a for _, a in live])
            n += len(live)
    batched = n / (time.perf_counter() - t)
    return {"single": single, "batched": batched}


def _live_speed(rows: list[dict[str, Any]], max_episodes: int) -> float:
    """LiveWeb steps/s replaying the same expert actions in Chromium (resets not counted)."""
    import gymnasium as gym

    import lynn  # noqa: F401
    from lynn.envs.worldmodel.data import episodes

    eps = [e for e in episodes(rows) if len(e) > 1][:max_episodes]
    env = gym.make("Lynn/LiveWeb-v0", split=None)
    busy, n = 0.0, 0
    try:
        for ep in eps:
            env.reset(options={"task_id": ep[0]["task_id"]})
            for r in ep:
                t = time.perf_counter()
                env.step(r["action"])
                busy += time.perf_counter() - t
                n += 1
    finally:
        env.close()
    return n / busy if busy else float("nan")


def _plot(curves: dict[str, dict[int, list[float]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for name, by_step in curves.items():
        steps = sorted(k for k, v in by_step.items() if len(v) >= 3)
        ax.plot(steps, [sum(by_step[s]) / len(by_step[s]) for s in steps], marker="o", label=name)
    ax.set_xlabel("step of the expert's episode")
    ax.set_ylabel("line F1, imagined vs real page")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title("World-model rollouts on held-out test instances")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    from lynn.envs.worldmodel.baselines import CopyModel, MemoryModel, NearestNeighbourModel
    from lynn.envs.worldmodel.data import heldout_sets, read_transitions, start_pages, training_split
    from lynn.envs.worldmodel.evaluate import one_step, rollout_f1
    from lynn.envs.worldmodel.reward_model import (
        UNSEEN_SHARE,
        RewardModel,
        answer_shapes,
        evaluate_reward,
        reward_examples,
        task_kinds,
    )

    ap = argparse.ArgumentParser(description="world model: quality, rollouts, reward model, speed")
    ap.add_argument("--train", required=True)
    ap.add_argument("--test", required=True)
    ap.add_argument("--model", help="a `lynn train world-model` folder with an LM")
    ap.add_argument("--out", default="benchmarks/figures")
    ap.add_argument(
        "--lm-limit", type=int, default=0, help="LM: at most this many transitions per set (0 = all)"
    )
    ap.add_argument("--envs", type=int, default=16, help="envs per step_batch")
    ap.add_argument("--speed-episodes", type=int, default=48)
    ap.add_argument("--lm-speed-episodes", type=int, default=8, help="episodes for the LM's steps/s")
    ap.add_argument(
        "--live-episodes", type=int, default=12, help="LiveWeb episodes for live steps/s (0: skip)"
    )
    ap.add_argument(
        "--skip", default="", help="comma list of sections to skip: quality,rollout,reward,imagined,speed"
    )
    ap.add_argument(
        "--eps",
        nargs="*",
        default=[],
        help="`lynn collect --epsilon` outputs: real failures for the reward model",
    )
    ap.add_argument("--json", help="write every figure here")
    args = ap.parse_args(argv)
    os.environ.setdefault("LYNN_TORCH_THREADS", "1")
    skip = set(filter(None, args.skip.split(",")))
    rows = read_transitions(args.train, args.test)
    train = training_split(rows)
    sets = heldout_sets(rows)
    figures: dict[str, Any] = {"train_transitions": len(train), "sets": {k: len(v) for k, v in sets.items()}}
    models: list[tuple[str, Any, int]] = [
        ("copy", CopyModel(), 0),
        ("nearest", NearestNeighbourModel(train), 0),
        ("memory", MemoryModel(train), 0),
    ]
    if args.model:
        from lynn.envs.worldmodel.model import load_world_model

        models.append(("lm", load_world_model(args.model, page_memory=False), args.lm_limit))
        models.append(("lm+memory", load_world_model(args.model, page_memory=True), args.lm_limit))
    print(
        f"train transitions (train split, held-out templates removed): {len(train)}; held-out: {figures['sets']}"
    )
    if "quality" not in skip:
        print(
            "\n| model | set | n | line F1 | line F1 (no ids) | exact | URL acc | summary F1 | Δ errors | s |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")
        for name, m, limit in models:
            for set_name, set_rows in sets.items():
                r = one_step(m, set_rows[:limit] if limit else set_rows)
                figures[f"quality/{name}/{set_name}"] = r
                print(
                    f"| {name} | {set_name} | {r['n']} | {r['line_f1']:.3f} | {r['line_f1_noid']:.3f} | {r['exact']:.3f} "
                    f"| {r['url_acc']:.3f} | {r['summary_f1']:.3f} | {r['errors']} | {r['seconds']:.1f} |",
                    flush=True,
                )
    if "rollout" not in skip:
        curves = {}
        print("\n| model | rollouts | mean line F1 by step 1..6 |")
        print("|---|---|---|")
        for name, m, limit in models:
            rr = sets["instances"][: limit * 2] if limit else sets["instances"]
            by_step = rollout_f1(m, rr)
            curves[name] = by_step
            means = [f"{sum(by_step[s]) / len(by_step[s]):.3f}" for s in sorted(by_step)[:6]]
            figures[f"rollout/{name}"] = {s: sum(v) / len(v) for s, v in by_step.items()}
            print(f"| {name} | {len(by_step.get(1, []))} | {' · '.join(means)} |", flush=True)
        _plot(curves, Path(args.out) / "worldmodel_f1_by_step.png")
        print(f"plot: {Path(args.out) / 'worldmodel_f1_by_step.png'}")
    # ε-random expert runs (`lynn collect --epsilon`): real failures for the reward model (train split for
    # training, test instances and held-out templates for measuring); the world models never see them.
    eps_rows = read_transitions(*args.eps) if args.eps else []
    eps_train, eps_sets = training_split(eps_rows), heldout_sets(eps_rows)
    rm_train = train + eps_train
    if "reward" not in skip:
        kinds = task_kinds()
        variants = [("expert runs only", train)] + ([("+ --eps runs", rm_train)] if eps_rows else [])
        print(
            "\n| reward model trained on | set | n | positives | real failures | accuracy | AUC "
            "| accuracy on real failures |"
        )
        print("|---|---|---|---|---|---|---|---|")
        misses: list[str] = []
        for vname, vtrain in variants:
            shapes = answer_shapes(vtrain)
            rm = RewardModel.fit(
                reward_examples(vtrain, kinds, 0, shapes, unseen=UNSEEN_SHARE), kinds, shapes=shapes
            )
            held = {k: sets[k] + eps_sets[k] for k in sets}
            for set_name, set_rows in {"train": vtrain, **held}.items():
                ex = reward_examples(set_rows, kinds, seed=1, shapes=shapes)
                r = evaluate_reward(rm, ex)
                fails = [e for e in ex if e[2] == "real failure"]
                r["real_failures"] = len(fails)
                r["real_failure_acc"] = evaluate_reward(rm, fails)["accuracy"] if fails else float("nan")
                # Right / all by kind of example (expert, corrupted answer, truncated, real failure, ...).
                by_why: dict[str, list[int]] = {}
                for f, y, why in ex:
                    by_why.setdefault(why, [0, 0])[0] += (rm.score_features(f) >= rm.threshold) == bool(y)
                    by_why[why][1] += 1
                r["by_example"] = {k: f"{a}/{n}" for k, (a, n) in by_why.items()}
                figures[f"reward/{vname}/{set_name}"] = r
                print(
                    f"| {vname} | {set_name} | {r['n']} | {r['positives']} | {len(fails)} | {r['accuracy']:.3f} "
                    f"| {r['auc']:.3f} | {r['real_failure_acc']:.3f} |"
                )
                misses.append(f"{vname} / {set_name}: {r['by_example']}")
        print("right / all, by kind of example:\n" + "\n".join(misses))
    if "imagined" not in skip:
        # The expert's recorded test episodes replayed in imagination: success by the reward model on the
        # imagined final page, beside the real outcome of the same episodes (the LiveWeb evaluator's).
        import tempfile

        from lynn.envs.worldmodel.data import episodes
        from lynn.envs.worldmodel.worldmodel_env import WebWorldModelEnv

        kinds = task_kinds()
        shapes = answer_shapes(rm_train)
        rm = RewardModel.fit(
            reward_examples(rm_train, kinds, 0, shapes, unseen=UNSEEN_SHARE), kinds, shapes=shapes
        )
        eps = episodes([r for r in rows if r.get("split") == "test"])
        print(
            "\n| world model (expert's test episodes replayed) | episodes | real success | imagined success |"
        )
        print("|---|---|---|---|")
        with tempfile.TemporaryDirectory() as tmp:
            starts = Path(tmp) / "starts.jsonl"
            starts.write_text("".join(json.dumps(s) + "\n" for s in start_pages(rows)))
            for name, m, limit in models:
                if name.startswith("lm") and limit:
                    continue  # a capped LM run skips the full replay
                env = WebWorldModelEnv(world_model=m, starts=str(starts), split="test", max_steps=30)
                env.reward_model = rm
                real = imagined = 0.0
                for ep in eps:
                    env.reset(options={"task_id": ep[0]["task_id"]})
                    for r in ep:
                        _, reward, terminated, truncated, _ = env.step(r["action"])
                    imagined += reward
                    real += float(ep[-1].get("reward", 0.0) >= 1.0)
                figures[f"imagined/{name}"] = {
                    "episodes": len(eps),
                    "real": real / len(eps),
                    "imagined": imagined / len(eps),
                }
                print(
                    f"| {name} | {len(eps)} | {real / len(eps):.3f} | {imagined / len(eps):.3f} |", flush=True
                )
    if "speed" not in skip:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            starts = Path(tmp) / "starts.jsonl"
            starts.write_text("".join(json.dumps(s) + "\n" for s in start_pages(rows)))
            test_rows = [r for r in rows if r.get("split") == "test"]
            print(f"\n| world model | imagined steps/s, 1 env | step_batch × {args.envs} |")
            print("|---|---|---|")
            for name, m, _limit in models:
                if name == "copy":
                    continue
                n_eps = args.lm_speed_episodes if name.startswith("lm") else args.speed_episodes
                s = _speed(m, str(starts), test_rows, args.envs, n_eps)
                figures[f"speed/{name}"] = s
                print(f"| {name} | {s['single']:.1f} | {s['batched']:.1f} |", flush=True)
            if args.live_episodes:
                live = _live_speed(test_rows, args.live_episodes)
                figures["speed/liveweb_live"] = live
                print(f"| LiveWeb (Chromium, live) | {live:.1f} | — |")
                for name, _, _ in models:
                    if f"speed/{name}" in figures:
                        print(f"batched {name} / live: {figures[f'speed/{name}']['batched'] / live:.2f}x")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
