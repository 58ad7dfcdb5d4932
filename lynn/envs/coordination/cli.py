"""``lynn bench coordination``: the routing benchmark (ours vs MABWiser and Vowpal Wabbit).

``bench`` is shared: other systems may add their own ``lynn bench <system>``, so this module adds
its subcommand to an existing ``bench`` parser when there is one. Heavy imports happen in the command.
"""

from __future__ import annotations

import argparse
from typing import Any


def _bench_systems(sub: Any) -> Any:
    """The sub-subparsers of ``lynn bench`` (created on first use)."""
    bench = sub.choices.get("bench")
    if bench is None:
        bench = sub.add_parser("bench", help="run a system's benchmark (tables + plots)")
        return bench.add_subparsers(dest="bench_system", required=True, metavar="SYSTEM")
    for action in bench._actions:  # argparse keeps the subparsers action among the parser's actions
        if isinstance(action, argparse._SubParsersAction):
            return action
    return bench.add_subparsers(dest="bench_system", required=True, metavar="SYSTEM")


def register(sub: Any) -> None:
    """Add ``lynn bench coordination`` to the ``lynn`` parser."""
    p = _bench_systems(sub).add_parser(
        "coordination", help="routing: LinUCB router vs MABWiser LinUCB, VW cb_explore_adf and baselines"
    )
    add_arguments(p)
    p.set_defaults(func=cmd_bench_coordination)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The benchmark's flags (shared by ``lynn bench coordination`` and the benchmarks/ script)."""
    parser.add_argument("--seeds", type=int, default=3, help="seeded streams per scenario")
    parser.add_argument("--steps", type=int, default=1000, help="decisions per stream (stationary: 2x)")
    parser.add_argument(
        "--scenarios", default="stationary,symphony-shock,symphony-shock-unavailable,drift,churn"
    )
    parser.add_argument("--speed-steps", type=int, default=2000, help="replayed decisions for decisions/s")
    parser.add_argument("--routers", help="comma-separated subset of the router labels (substring match)")
    parser.add_argument("--out", default="results/bench/coordination", help="where the PNG and tables go")
    parser.add_argument("--quiet", action="store_true", help="no per-run progress lines")


def cmd_bench_coordination(args: argparse.Namespace) -> int:
    from lynn.cli import UsageError
    from lynn.envs.coordination.bench import run_from_args
    from lynn.envs.coordination.scenarios import SCENARIOS

    unknown = [s for s in args.scenarios.split(",") if s not in SCENARIOS]
    if unknown:
        raise UsageError(f"unknown scenario(s) {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}")
    if args.seeds < 1 or args.steps < 1 or args.speed_steps < 1:
        raise UsageError("--seeds, --steps and --speed-steps must be at least 1")
    return run_from_args(args)
