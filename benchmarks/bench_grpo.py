"""GRPO through Echo: co-located vs pull vs push_pull (S sweep) on EVMQuest, same model and update budget.

Each configuration is one ``lynn train grpo`` run (:func:`lynn.agents.llm.grpo_trainer.train_grpo`); the
table reports wall time, learner utilisation, groups/s, the staleness histogram, dropped/lost/refused
rollouts and the training reward (first vs last 5 updates). ``--eval`` adds held-out atomic success of
each final model (every atomic task, seeds from 0, as ``lynn eval --split atomic``).

A config is ``colocated``, ``pull[::N]`` or ``push_pull:S[:N]`` (``N`` overrides ``--workers``: the
provisioning level). Each Echo row also carries the **capacity rule's prediction** from what that
run measured: ``T_train`` (mean learner update), per-worker throughput ``μ = 1 / (mean seconds per
group)``, ``T_bcast`` (the workers' mean wait for a published snapshot through the chain broadcast),
and equation (2) of :mod:`lynn.wrappers.echo.capacity` (``pull``: equation (4)), next to the
measured learner utilisation — over the whole run and over a **steady-state window** that leaves out
the start-up transient (:func:`steady_window`, :func:`capacity_columns`).

``--per-worker`` makes the workers heterogeneous (a JSON list of per-worker settings: ``gen_batch``,
``max_new_tokens``); ``--activate`` then runs **cost-aware activation** (:func:`activation`): from the
first config's measured ``μ_i`` it picks the cheapest set of workers that satisfies the capacity rule
(:func:`lynn.wrappers.echo.capacity.cheapest_workers`) and runs that set. ``--reanalyse`` rebuilds
the table from the runs' ``summary.json`` without training.

::

    LYNN_TORCH_THREADS=1 python benchmarks/bench_grpo.py --model /work/models/lm-evm2 --out /tmp/bench_grpo \\
        --updates 4 --configs colocated pull push_pull:1 push_pull:2 push_pull:4 push_pull:2:1 push_pull:2:3
    # the capacity rule at three provisioning levels, 20 updates each
    LYNN_TORCH_THREADS=1 python benchmarks/bench_grpo.py --model /work/models/lm-evm2 --out /tmp/cap \\
        --updates 20 --configs push_pull:4:1 push_pull:4:2 push_pull:4:3
    # heterogeneous workers, then the set cost-aware activation picks
    LYNN_TORCH_THREADS=1 python benchmarks/bench_grpo.py --model /work/models/lm-evm2 --out /tmp/het \\
        --updates 12 --configs push_pull:4 --per-worker '[{}, {"gen_batch": 1}, {"max_new_tokens": 160}]' --activate
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any


def steady_window(history: list[dict[str, Any]], steady_from: float = 0.25) -> tuple[int, int]:
    """The updates of the steady state: ``[k0, n)`` with ``k0 = max(2, ceil(steady_from * n))``.

    The first ``k0`` updates are the start-up transient: the workers start together and build a
    backlog before the learner's first update, so the first updates never wait. The window is timed
    from the end of update ``k0`` (``history[k0 - 1]["time_s"]``) to the end of the last.
    """
    n = len(history)
    return min(n, max(2, math.ceil(steady_from * n))), n


def capacity_columns(
    summ: dict[str, Any], workers: int, groups: int, kappa: int, mode: str, steady_from: float = 0.25
) -> dict[str, Any]:
    """The capacity rule's prediction vs the measured utilisation, whole run and steady state.

    Whole run (as the first passes): ``T_train`` = mean update, ``μ = 1 / mean seconds per group``,
    ``T_bcast`` = the workers' mean wait per snapshot load; measured U = busy / (first to last update).
    Steady state (:func:`steady_window`): the same inputs from the window's updates only; measured
    ``U_ss = Σ busy_s / window``; ``Σμ_obs`` = rollouts that arrived in the window / its length (what
    the workers really delivered, overheads included), and the rule evaluated with ``Σμ_obs`` too, to
    tell a wrong ``μ`` from a wrong rule; the learner's mean wait per update, and the time per update
    that is neither (``steady_other_s``: checkpoints written between updates).
    """
    from lynn.wrappers.echo.capacity import predicted_utilisation, predicted_utilisation_pull

    hist = summ.get("history", [])
    durs = [h["rollout_s_mean"] for h in hist if h.get("rollout_s_mean")]
    if mode == "colocated" or not durs:
        return {}
    loads = max(1, summ.get("publishes", 1) * workers)  # at most one load per worker per snapshot
    t_bcast = summ.get("weight_wait_s", 0.0) / loads

    def predict(mus: list[float] | float, t_train: float) -> float:
        if mode == "pull":
            per = mus if isinstance(mus, list) else [mus / workers] * workers
            return predicted_utilisation_pull(per, t_train, t_bcast, groups)
        return predicted_utilisation(mus, t_train, t_bcast, groups, kappa)

    mu = 1.0 / (sum(durs) / len(durs))
    out: dict[str, Any] = {
        "mu_per_worker": round(mu, 4),
        "T_bcast_s": round(t_bcast, 2),
        "predicted_U": round(predict(workers * mu, summ["train_s_mean"]), 3),
    }
    k0, n = steady_window(hist, steady_from)
    if n - k0 < 2 or "busy_s" not in hist[-1]:
        return out
    win = hist[k0:]
    span = hist[-1]["time_s"] - hist[k0 - 1]["time_s"]
    busy = sum(h["busy_s"] for h in win)
    t_train = busy / len(win)
    ss_durs = [h["rollout_s_mean"] for h in win if h.get("rollout_s_mean")]
    mu_ss = 1.0 / (sum(ss_durs) / len(ss_durs))

    def by_worker(records: list[dict[str, Any]]) -> dict[int, float]:
        acc: dict[int, list[float]] = {}
        for h in records:
            for w, d in (h.get("rollout_s_by_worker") or {}).items():
                acc.setdefault(int(w), []).append(d)
        return {w: 1.0 / (sum(v) / len(v)) for w, v in acc.items()}

    # mu_i of worker i: over the window; a worker none of whose groups the window consumed (all
    # dropped stale, or slow) over the whole run; else the window's mean rate.
    in_win, whole = by_worker(win), by_worker(hist)
    mus = [in_win.get(i, whole.get(i, mu_ss)) for i in range(workers)]
    if span > 0 and "generated_by_worker" in hist[-1] and "generated_by_worker" in hist[k0 - 1]:
        # Arrival rates (the capacity rule's mu_i): every rollout that arrived in the window, consumed
        # or dropped; the consumed groups' durations overstate a worker whose groups age out.
        from lynn.wrappers.echo.capacity import arrival_rates

        last, first = hist[-1]["generated_by_worker"], hist[k0 - 1]["generated_by_worker"]
        got = {int(w): c for w, c in last.items()}
        before = {int(w): c for w, c in first.items()}
        mus = arrival_rates([got.get(i, 0) - before.get(i, 0) for i in range(workers)], span)
    arrived = hist[-1]["generated"] - hist[k0 - 1]["generated"]
    mu_obs = arrived / span if span > 0 else 0.0
    out.update(
        steady_updates=f"{k0 + 1}-{n}",
        steady_T_train_s=round(t_train, 2),
        steady_mu_i=[round(m, 4) for m in mus],
        steady_sum_mu=round(sum(mus), 4),
        steady_sum_mu_obs=round(mu_obs, 4),
        steady_wait_s=round(sum(h["wait_s"] for h in win) / len(win), 2),
        # Neither training nor waiting (checkpoints in on_update, the driver's bookkeeping), per update.
        steady_other_s=round((span - busy - sum(h["wait_s"] for h in win)) / len(win), 2),
        steady_predicted_U=round(predict(mus, t_train), 3),
        steady_predicted_U_obs=round(predict(mu_obs, t_train), 3),
        steady_measured_U=round(busy / span, 3) if span > 0 else 0.0,
    )
    return out


def run_config(
    args: argparse.Namespace, c: str, per_worker: list[dict[str, Any]] | None, name: str | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One ``lynn train grpo`` run (or its stored summary with ``--reanalyse``) and its table row."""
    from lynn.agents.llm.grpo_trainer import GRPOTrainConfig, train_grpo

    mode, _, rest = c.partition(":")
    s, _, n = rest.partition(":")
    S = int(s or 0)
    N = int(n) if n else (len(per_worker) if per_worker else args.workers)
    out = Path(args.out) / (name or c.replace(":", "-"))
    if args.reanalyse:  # the table again from the runs' summary.json, nothing trained
        summ = json.loads((out / "summary.json").read_text())
    else:
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
                worker_overrides=per_worker,
            )
        )
    row = {
        "config": name or c,
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
        **capacity_columns(summ, N, args.groups, args.kappa, mode, args.steady_from),
        "learner_sent_MB": round(summ.get("learner_sent_bytes", 0) / 1e6, 1),
    }
    if args.eval and not args.reanalyse:
        from lynn.eval.runner import EvalConfig, evaluate

        ev = evaluate(
            EvalConfig("Lynn/EVMQuest-v0", agent="lm", split="atomic", out=str(out / "eval"),
                       agent_kwargs={"model": summ["final"]}, progress=False)
        )  # fmt: skip
        row["heldout_success"] = ev.get("success_rate", ev.get("success"))
    print(json.dumps(row), flush=True)
    return row, summ


def activation(args: argparse.Namespace, per_worker: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """Cost-aware activation on measured workers, then a run with the set it picks.

    The first config's run measured one worker of each type in ``--per-worker`` (its steady-state
    ``μ_i``, ``T_train``, ``T_bcast``). Candidates: ``--copies`` workers of each type, cost
    ``--costs`` (default 1 per worker: one process on one core). :func:`cheapest_workers` picks the
    cheapest set meeting inequality (1) among the workers that pass condition (3) at the config's S;
    the chosen set then runs with the same budget, and its measured utilisation is set against the
    utilisation (2') predicted from the *first* run's ``μ_i`` (a real prediction) and from its own.
    """
    from lynn.wrappers.echo.capacity import WorkerSpec, cheapest_workers

    if not per_worker:
        raise SystemExit("--activate needs --per-worker (the worker types)")
    c = args.configs[0]
    mode, _, rest = c.partition(":")
    S = int(rest.partition(":")[0] or 0)
    if mode != "push_pull":
        raise SystemExit("--activate needs a push_pull first config")
    meas = json.loads((Path(args.out) / c.replace(":", "-") / "summary.json").read_text())
    cols = capacity_columns(meas, len(per_worker), args.groups, args.kappa, mode, args.steady_from)
    if "steady_mu_i" not in cols:
        raise SystemExit("the measurement run is too short for a steady-state window")
    mus, t_train, t_bcast = cols["steady_mu_i"], cols["steady_T_train_s"], cols["T_bcast_s"]
    costs = [float(x) for x in args.costs.split(",")] if args.costs else [1.0] * len(per_worker)
    candidates = [
        WorkerSpec(f"{json.dumps(per_worker[i], sort_keys=True)}#{k}", mus[i], costs[i])
        for i in range(len(per_worker))
        for k in range(args.copies)
    ]
    plan = cheapest_workers(
        candidates,
        train_s=t_train,
        bcast_s=t_bcast,
        rollouts_per_update=args.groups,
        kappa=args.kappa,
        staleness=S,
    )
    chosen = [json.loads(w.name.rpartition("#")[0]) for w in plan.workers]
    info = {
        "candidates": [(w.name, round(w.throughput, 4), w.cost) for w in candidates],
        "required_sum_mu": round(plan.required_throughput, 4),
        "chosen": [w.name for w in plan.workers],
        "chosen_sum_mu": round(plan.total_throughput, 4),
        "cost": plan.total_cost,
        "feasible": plan.feasible,
        "excluded_too_slow": [w.name for w in plan.excluded_too_slow],
        "predicted_U_from_measurement": round(plan.predicted_utilisation, 3),
    }
    print(json.dumps({"activation": info}), flush=True)
    (Path(args.out) / "activation.json").write_text(json.dumps(info, indent=1))
    if not chosen:
        print("cost-aware activation switched no worker on (every type fails condition (3))", flush=True)
        return []
    row, _ = run_config(args, f"push_pull:{S}:{len(chosen)}", chosen, name="activated")
    row["predicted_U_from_measurement"] = info["predicted_U_from_measurement"]
    return [row]


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
    ap.add_argument(
        "--steady-from", type=float, default=0.25, help="leave out this first fraction of updates"
    )
    ap.add_argument(
        "--per-worker",
        help="heterogeneous workers, a JSON list of per-worker settings, e.g. '[{\"gen_batch\": 1}, {}]'",
    )
    ap.add_argument("--activate", action="store_true", help="cost-aware activation after the first config")
    ap.add_argument("--copies", type=int, default=2, help="--activate: candidate workers of each type")
    ap.add_argument("--costs", help="--activate: comma-separated cost per worker type (default 1 each)")
    ap.add_argument("--reanalyse", action="store_true", help="rebuild the table from OUT/*/summary.json")
    ap.add_argument("--configs", nargs="+", default=["colocated", "pull", "push_pull:1", "push_pull:2"])
    args = ap.parse_args()

    per_worker = json.loads(args.per_worker) if args.per_worker else None
    rows = [run_config(args, c, per_worker)[0] for c in args.configs]
    if args.activate:
        rows += activation(args, per_worker)
    (Path(args.out) / "bench_grpo.json").write_text(json.dumps(rows, indent=1))
    keys = list(dict.fromkeys(k for r in rows for k in r))
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for r in rows:
        print("| " + " | ".join(str(r.get(k, "")) for k in keys) + " |")


if __name__ == "__main__":
    main()
