"""GRPO through Echo: co-located vs pull vs push_pull (S sweep) on EVMQuest, same model and update budget.

Each configuration is one ``lynn train grpo`` run (:func:`lynn.wrappers.echo.grpo_train.train_grpo`); the
table reports wall time, learner utilisation, groups/s, the staleness histogram, dropped/lost/refused
rollouts and the training reward (first vs last 5 updates). ``--eval`` adds held-out atomic success of
each final model (every atomic task, seeds from 0, as ``lynn eval --split atomic``).

::

    LYNN_TORCH_THREADS=1 python benchmarks/bench_grpo.py --model /work/models/lm-evm2 --out /tmp/bench_grpo \\
        --updates 4 --configs colocated pull push_pull:1 push_pull:2 push_pull:4
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--updates", type=int, default=4)
    ap.add_argument("--groups", type=int, default=2)
    ap.add_argument("--group-size", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--max-new-tokens", type=int, default=320)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--eval", action="store_true")
    ap.add_argument("--configs", nargs="+", default=["colocated", "pull", "push_pull:1", "push_pull:2"])
    args = ap.parse_args()

    from lynn.wrappers.echo.grpo_train import GRPOTrainConfig, train_grpo

    rows = []
    for c in args.configs:
        mode, _, s = c.partition(":")
        S = int(s or 0)
        out = Path(args.out) / c.replace(":", "-S")
        summ = train_grpo(
            GRPOTrainConfig(
                model=args.model,
                out=str(out),
                mode=mode,
                staleness=S if mode == "push_pull" else 0,
                workers=args.workers,
                updates=args.updates,
                groups_per_update=args.groups,
                group_size=args.group_size,
                max_new_tokens=args.max_new_tokens,
                seed=args.seed,
                progress=False,
            )
        )
        row = {
            "config": c,
            "updates": summ["updates"],
            "wall_s": round(summ["wall_s"], 1),
            "utilisation": round(summ["utilisation"], 3),
            "groups_per_s": round(summ["rollouts_per_s"], 4),
            "staleness_hist": summ["staleness_hist"],
            "dropped_stale": summ["dropped_stale"],
            "lost": summ["lost"],
            "refused": summ["refused"],
            "train_s_mean": round(summ["train_s_mean"], 2),
            "reward_first5": round(summ["reward_first5"], 3),
            "reward_last5": round(summ["reward_last5"], 3),
        }
        if args.eval:
            from lynn.eval.runner import EvalConfig, evaluate

            ev = evaluate(
                EvalConfig("Lynn/EVMQuest-v0", agent="lm", split="atomic", out=str(out / "eval"),
                           agent_kwargs={"model": summ["final"]}, progress=False)
            )  # fmt: skip
            row["heldout_success"] = ev.get("success_rate", ev.get("success"))
        rows.append(row)
        print(json.dumps(row), flush=True)
    (Path(args.out) / "bench_grpo.json").write_text(json.dumps(rows, indent=1))
    keys = list(rows[0])
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for r in rows:
        print("| " + " | ".join(str(r[k]) for k in keys) + " |")


if __name__ == "__main__":
    main()
