"""Full oracle run over every EVMQuest task, per chain backend (success rate and wall time).

Run: ``lynn bench evm-oracle`` or ``.venv/bin/python benchmarks/bench_evm_oracle.py`` [--backends embedded,anvil]
"""

from __future__ import annotations

import argparse
import time

from lynn.agents.evmquest_oracle import EVMQuestOracle
from lynn.envs.evmquest.chain import anvil_binary
from lynn.envs.evmquest.evmquest_env import EVMQuestEnv
from lynn.errors import UsageError
from lynn.system import find as find_tool


def run_backend(backend: str) -> tuple[int, int, float, float]:
    """(passed, tasks, chain + genesis seconds, seconds for every task) of the oracle on ``backend``."""
    t0 = time.perf_counter()
    env = EVMQuestEnv(split="all", backend=backend)
    env.reset(seed=0)
    start_s = time.perf_counter() - t0
    oracle = EVMQuestOracle(env)
    passed = 0
    t0 = time.perf_counter()
    for i, task_id in enumerate(sorted(env.specs)):
        obs, info = env.reset(seed=i, options={"task_id": task_id})
        done = False
        while not done:
            obs, _, terminated, truncated, info = env.step(oracle.act(obs, info))
            done = terminated or truncated
        passed += bool(info["success"])
    run_s = time.perf_counter() - t0
    env.close()
    return passed, len(env.specs), start_s, run_s


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The benchmark's flags."""
    parser.add_argument(
        "--backends", help="comma-separated chain backends (default: embedded, and anvil when it is found)"
    )


def run(args: argparse.Namespace) -> int:
    """Run the oracle over every task per backend and print the table."""
    from lynn.envs.evmquest.chain import BACKENDS

    backends = (args.backends or ("embedded,anvil" if anvil_binary() else "embedded")).split(",")
    unknown = [b for b in backends if b not in BACKENDS or b == "rpc"]
    if unknown:
        raise UsageError(f"unknown backend(s) {', '.join(unknown)}; choose from embedded, anvil")
    if "anvil" in backends and anvil_binary() is None:
        raise UsageError(find_tool("anvil").explain())
    print(f"{'backend':<10} {'passed':>9} {'chain + genesis s':>18} {'107 tasks s':>12} {'s/task':>7}")
    rows = {}
    for backend in backends:
        passed, total, start_s, run_s = run_backend(backend)
        rows[backend] = run_s
        print(f"{backend:<10} {passed:>4}/{total:<4} {start_s:>18.2f} {run_s:>12.1f} {run_s / total:>7.2f}")
    if len(rows) == 2:
        a, b = rows.values()
        print(f"ratio {list(rows)[0]}/{list(rows)[1]}: {a / b:.2f}x")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` like ``lynn bench evm-oracle`` and run the benchmark."""
    from lynn.bench import main as bench_main

    return bench_main(__name__, argv)
