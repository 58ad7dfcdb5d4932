"""Full oracle run over every EVMQuest task, per chain backend (success rate and wall time).

Run: .venv/bin/python benchmarks/bench_evm_oracle.py [--backends embedded,anvil]
"""

from __future__ import annotations

import argparse
import time

from lynn.agents.evmquest_oracle import EVMQuestOracle
from lynn.envs.evmquest.chain import anvil_binary
from lynn.envs.evmquest.evmquest_env import EVMQuestEnv


def run(backend: str) -> tuple[int, int, float, float]:
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backends", default="embedded,anvil" if anvil_binary() else "embedded")
    args = parser.parse_args()
    print(f"{'backend':<10} {'passed':>9} {'chain + genesis s':>18} {'107 tasks s':>12} {'s/task':>7}")
    rows = {}
    for backend in args.backends.split(","):
        passed, total, start_s, run_s = run(backend)
        rows[backend] = run_s
        print(f"{backend:<10} {passed:>4}/{total:<4} {start_s:>18.2f} {run_s:>12.1f} {run_s / total:>7.2f}")
    if len(rows) == 2:
        a, b = rows.values()
        print(f"ratio {list(rows)[0]}/{list(rows)[1]}: {a / b:.2f}x")


if __name__ == "__main__":
    main()
