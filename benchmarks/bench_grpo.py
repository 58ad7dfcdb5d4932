"""GRPO through Echo: co-located vs pull vs push_pull (S sweep) on EVMQuest, same model and update budget.

Each configuration is one ``lynn train grpo`` run (:func:`lynn.wrappers.echo.grpo_train.train_grpo`); the
table reports wall time, learner utilisation, groups/s, the staleness histogram, dropped/lost/refused
rollouts and the training reward (first vs last 5 updates). ``--eval`` adds held-out atomic success of
each final model (every atomic task, seeds from 0, as ``lynn eval --split atomic``).

A config is ``colocated``, ``pull[::N]`` or ``push_pull:S[:N]`` (``N`` overrides ``--workers``: the
provisioning level). Each Echo row also carries the **capacity rule's prediction** from what that
run measured: ``T_train`` (mean learner update), per-worker throughput ``μ = 1 / (mean seconds per
group)``, ``T_bcast`` (the workers' mean wait for a published snapshot through the chain broadcast),
and equation (2) of :mod:`lynn.wrappers.echo.capacity` (``pull``: equation (4)), next to the
measured learner utilisation.

::

    LYNN_TORCH_THREADS=1 python benchmarks/bench_grpo.py --model /work/models/lm-evm2 --out /tmp/bench_grpo \\
        --updates 4 --configs colocated pull push_pull:1 push_pull:2 push_pull:4 push_pull:2:1 push_pull:2:3
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
    ap.add_argument("--kappa", type=int, default=1)
    ap.add_argument("--broadcast", choices=("direct", "chain"), default="chain")
    ap.add_argument("--tasks", help="comma-separated atomic task ids (default: every atomic task)")
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--configs", nargs="+", default=["colocated", "pull", "push_pull:1", "push_pull:2"])
    args = ap.parse_args()

    from lynn.wrappers.echo.capacity import predicted_utilisation, predicted_utilisation_pull
    from lynn.wrappers.echo.grpo_train import GRPOTrainConfig, train_grpo

    rows = []
    for c in args.configs:
        mode, _, rest = c.partition(":")
        s, _, n = rest.partition(":")
        S = int(s or 0)
        N = int(n) if n else args.workers
        out = Path(args.out) / c.replace(":", "-")
        summ = train_grpo(
            GRPOTrainConfig(
                model=args.model,
                out=str(out),
                mode=mode,
                staleness=S if mode == "push_pull" else 0,
                kappa=args.kappa,
                broadcast=args.broadcast,
                lr=args.lr,
                tasks=args.tasks.split(",") if args.tasks else None,
                workers=N,
                updates=args.updates,
                groups_per_update=args.groups,
                group_size=args.group_size,
                max_new_tokens=args.max_new_tokens,
                seed=args.seed,
                progress=False,
            )
        )
        hist = summ.get("history", [])
        durs = [h["rollout_s_mean"] for h in hist if h.get("rollout_s_mean")]
        row_cap: dict[str, float] = {}
        if mode != "colocated" and durs:
            mu = 1.0 / (sum(durs) / len(durs))  # groups/s of one worker, measured in this run
            t_train = summ["train_s_mean"]
            loads = max(1, summ.get("publishes", 1) * N)  # at most one load per worker per snapshot
            t_bcast = summ.get("weight_wait_s", 0.0) / loads
            if mode == "pull":
                pred = predicted_utilisation_pull([mu] * N, t_train, t_bcast, args.groups)
            else:
                pred = predicted_utilisation(N * mu, t_train, t_bcast, args.groups, args.kappa)
            row_cap = {
                "mu_per_worker": round(mu, 4),
                "T_bcast_s": round(t_bcast, 2),
                "predicted_U": round(pred, 3),
            }
        row = {
            "config": c,
            "workers": N if mode != "colocated" else 0,
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
            **row_cap,
            "learner_sent_MB": round(summ.get("learner_sent_bytes", 0) / 1e6, 1),
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
