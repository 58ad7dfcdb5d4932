"""The embedded chain's gas estimator against py-evm's default, on the same states and transactions.

Every ``eth_estimateGas`` of the oracle's episodes over all 107 EVMQuest tasks goes to both estimators on
the same py-evm state: py-evm's ``binary_gas_search_intrinsic_tolerance`` (the anchor) and ours
(:func:`lynn.envs.evmquest.gas_search.replayed_gas_search`). Prints the executions of the transaction (runs
of ``state.apply_transaction``), the estimators' CPU seconds, and how many answers differ (must be 0).

    .venv/bin/python benchmarks/bench_evm_gas_search.py [--mutants] [--seed 5]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from eth.estimators.gas import binary_gas_search_intrinsic_tolerance as pyevm_default

from lynn.envs.evmquest.evmquest_env import EVMQuestEnv, implemented_specs
from lynn.envs.evmquest.gas_search import counted_estimate, replayed_gas_search
from lynn.envs.evmquest.spec import generic_mutants, oracle_steps


def _estimate(
    estimator: Callable[[Any, Any], int], state: Any, tx: Any
) -> tuple[tuple[Any, ...], int, float]:
    t0 = time.process_time()
    outcome, runs = counted_estimate(estimator, state, tx)
    return outcome, runs, time.process_time() - t0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutants", action="store_true", help="also every generic mutant of every task")
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args(argv)
    totals = {"estimates": 0, "differ": 0, "default_runs": 0, "our_runs": 0, "default_s": 0.0, "our_s": 0.0}

    def side_by_side(state: Any, tx: Any) -> int:
        default, default_runs, default_s = _estimate(pyevm_default, state, tx)
        ours, our_runs, our_s = _estimate(replayed_gas_search, state, tx)
        totals["estimates"] += 1
        totals["differ"] += ours != default
        totals["default_runs"] += default_runs
        totals["our_runs"] += our_runs
        totals["default_s"] += default_s
        totals["our_s"] += our_s
        if default[0] == "raises":
            raise default[1](*default[2])
        return int(default[1])

    env = EVMQuestEnv(split="all")
    env.reset(seed=0)
    chain = env.chain.tester.backend.chain
    type(chain).gas_estimator = staticmethod(side_by_side)
    chain.gas_estimator = side_by_side

    def run(scripts: list[str]) -> None:
        for script in [*scripts, json.dumps({"done": True})]:
            _, _, terminated, truncated, _ = env.step(script)
            if terminated or truncated:
                return

    for spec in implemented_specs("all"):
        env.reset(seed=args.seed, options={"task_id": spec.task_id})
        mutants = generic_mutants(env.instance, env.names, env.before, np.random.default_rng(1))
        run(oracle_steps(env.instance, env.names, env.before))
        for _, scripts in mutants if args.mutants else []:
            env.reset(seed=args.seed, options={"task_id": spec.task_id})
            run(scripts)
    env.close()
    t = totals
    print(f"episodes: oracle{' + generic mutants' if args.mutants else ''}, 107 tasks, seed {args.seed}")
    print(f"{'estimator':<34} {'executions':>10} {'per estimate':>12} {'CPU s':>7}")
    for name, runs, cpu in (
        ("py-evm binary_gas_search (anchor)", t["default_runs"], t["default_s"]),
        ("ours: replayed_gas_search", t["our_runs"], t["our_s"]),
    ):
        print(f"{name:<34} {runs:>10} {runs / max(1, t['estimates']):>12.2f} {cpu:>7.2f}")
    print(
        f"estimates {t['estimates']}, answers that differ {t['differ']}; executions "
        f"{t['default_runs'] / max(1, t['our_runs']):.2f}x fewer, CPU {t['default_s'] / max(1e-9, t['our_s']):.2f}x less"
    )
    return 1 if t["differ"] else 0


if __name__ == "__main__":
    sys.exit(main())
