"""Learner utilisation, push_pull vs pull, and the capacity rule's prediction vs measurement.

A synthetic but real run: worker processes (local backend) whose rollout takes `d` seconds and
whose snapshot load takes `T_bcast` (an emulated slow link), and a learner whose update takes
`T_train`; all three are sleeps, so the 2 shared cores are not the bottleneck and the timing
structure is exactly the one the capacity model describes. For each provisioning level (number of
workers) both modes run the same updates; the table prints measured utilisation next to the
model's prediction (equation (2') for push_pull, (4) for pull), and a PNG plots them.

    .venv/bin/python benchmarks/bench_echo_utilisation.py [--updates 40] [--plot PATH]
"""

from __future__ import annotations

import argparse
import time

from lynn.bench import pyplot, save_figure
from lynn.errors import UsageError
from lynn.wrappers.echo.actor_learner import ActorLearner
from lynn.wrappers.echo.capacity import (
    WorkerSpec,
    cheapest_workers,
    predicted_utilisation,
    predicted_utilisation_pull,
    required_throughput,
)

TRAIN_S, ROLLOUT_S, BCAST_S, R, KAPPA = 0.1, 0.1, 0.02, 4, 2
STALENESS = 4  # condition (3): S >= κ - 1 + (T_bcast + 2d)/T_train = 3.2


class SleepyWorker:
    def __init__(self, index: int) -> None:
        self.version = -1

    def set_weights(self, weights: dict[str, int]) -> None:
        time.sleep(BCAST_S)  # receiving the snapshot over an emulated slow link
        self.version = weights["version"]

    def rollout(self, seed: int) -> int:
        time.sleep(ROLLOUT_S)
        return self.version


class SleepyLearner:
    def __init__(self) -> None:
        self.version = 0

    def get_weights(self) -> dict[str, int]:
        return {"version": self.version}

    def update(self, batch: list[int]) -> dict[str, float]:
        time.sleep(TRAIN_S)
        self.version += 1
        return {}


def measure(mode: str, workers: int, updates: int) -> float:
    al = ActorLearner(
        SleepyWorker,
        SleepyLearner(),
        mode=mode,
        num_workers=workers,
        rollouts_per_update=R,
        staleness=STALENESS,
        kappa=KAPPA,
    )
    try:
        al.run(updates=3)  # warm-up: processes up, first snapshot loaded
        return al.run(updates=updates).utilisation
    finally:
        al.close()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The benchmark's flags."""
    parser.add_argument("--updates", type=int, default=40)
    parser.add_argument("--levels", default="1,2,3,5,6", help="comma-separated worker counts")
    parser.add_argument(
        "--plot", default="benchmarks/figures/echo_utilisation.png", help="PNG path ('' for none)"
    )


def run(args: argparse.Namespace) -> int:
    """Measure both modes at each provisioning level, print the table and write the plot."""
    try:
        levels = [int(x) for x in args.levels.split(",")]
    except ValueError:
        raise UsageError(f"--levels expects comma-separated worker counts, got {args.levels!r}") from None
    if args.updates < 1 or min(levels) < 1:
        raise UsageError("--updates and every --levels entry must be at least 1")
    need = required_throughput(TRAIN_S, BCAST_S, R, KAPPA)
    plan = cheapest_workers(
        [WorkerSpec(f"w{i}", 1 / ROLLOUT_S) for i in range(8)],
        train_s=TRAIN_S,
        bcast_s=BCAST_S,
        rollouts_per_update=R,
        kappa=KAPPA,
        staleness=STALENESS,
    )
    print(
        f"T_train={TRAIN_S}s rollout={ROLLOUT_S}s T_bcast={BCAST_S}s R={R} κ={KAPPA} S={STALENESS}: rule needs "
        f"Σμ >= {need:.1f} rollouts/s -> {len(plan.workers)} workers of {1 / ROLLOUT_S:.0f}/s"
    )
    rows = []
    for n in levels:
        mus = [1 / ROLLOUT_S] * n
        row = {
            "workers": n,
            "push_pull": measure("push_pull", n, args.updates),
            "push_pull_pred": predicted_utilisation(mus, TRAIN_S, BCAST_S, R, KAPPA),
            "pull": measure("pull", n, args.updates),
            "pull_pred": predicted_utilisation_pull(mus, TRAIN_S, BCAST_S, R),
        }
        rows.append(row)
    print(
        "| workers | Σμ / required | pull measured | pull predicted | push_pull measured | push_pull predicted | |pred − meas| |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        err = abs(r["push_pull_pred"] - r["push_pull"])
        print(
            f"| {r['workers']} | {r['workers'] / ROLLOUT_S / need:.2f} | {r['pull']:.1%} | {r['pull_pred']:.1%} | "
            f"{r['push_pull']:.1%} | {r['push_pull_pred']:.1%} | {err:.1%} |"
        )
    ratio = [r["push_pull"] / r["pull"] for r in rows]
    print(f"push_pull / pull utilisation: {', '.join(f'{x:.2f}x' for x in ratio)}")
    if args.plot:
        plt = pyplot()

        xs = [r["workers"] for r in rows]
        fig, ax = plt.subplots(figsize=(6, 4))
        fine = [x / 10 for x in range(5, 10 * max(xs) + 6)]
        curve = [predicted_utilisation(x / ROLLOUT_S, TRAIN_S, BCAST_S, R, KAPPA) for x in fine]
        ax.plot(fine, curve, "-", color="C0", label="push_pull predicted (capacity rule)")
        ax.plot(xs, [r["push_pull"] for r in rows], "o", color="C0", label="push_pull measured")
        ax.plot(xs, [r["pull_pred"] for r in rows], "--", color="C1", label="pull predicted")
        ax.plot(xs, [r["pull"] for r in rows], "s", color="C1", label="pull measured")
        ax.axvline(need * ROLLOUT_S, color="grey", lw=0.8, ls=":", label="rule: minimum workers")
        ax.set_xlabel("rollout workers (10 rollouts/s each)")
        ax.set_ylabel("learner utilisation")
        ax.set_ylim(0, 1.05)
        ax.legend(fontsize=8, loc="lower right")
        ax.set_title("Echo learner utilisation vs provisioning")
        save_figure(fig, args.plot)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` like ``lynn bench echo-utilisation`` and run the benchmark."""
    from lynn.bench import main as bench_main

    return bench_main(__name__, argv)
