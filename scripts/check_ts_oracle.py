"""The TypeScript oracle on every task it covers, and per-script latency TS vs Python.

Usage::

    .venv/bin/python scripts/check_ts_oracle.py [--seeds 0,1,2] [--tasks a,b] [--no-python] [--composites]

Atomic tasks by default; ``--composites`` plays the composites of ``TS_COMPOSITES`` instead.

Prints one line per failure, then the pass count and the median / p90 ``script_s`` (the env's
timing of one script: start of the contained worker to its result) for each language.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any


def _run(
    language: str, tasks: list[str], seeds: list[int], split: str = "atomic"
) -> tuple[int, list[str], list[float]]:
    from lynn.agents.evmquest_oracle import EVMQuestOracle
    from lynn.envs.evmquest.evmquest_env import EVMQuestEnv

    env = EVMQuestEnv(split=split, script_language=language)
    agent = EVMQuestOracle(env)
    passed, failures, times = 0, [], []
    try:
        for task_id in tasks:
            for seed in seeds:
                obs, info = env.reset(seed=seed, options={"task_id": task_id})
                terminated = False
                while not terminated:
                    obs, _, terminated, truncated, info = env.step(agent.act(obs, info))
                    terminated = terminated or truncated
                    if "script_s" in info["timings"]:
                        times.append(float(info["timings"]["script_s"]))
                if info.get("success"):
                    passed += 1
                else:
                    bad = [c["name"] for c in info.get("checks", []) if not c.get("passed")]
                    failures.append(
                        f"{language} {task_id} seed {seed}: {info.get('error')} failed checks {bad}"
                    )
    finally:
        env.close()
    return passed, failures, times


def _summary(times: list[float]) -> str:
    ordered = sorted(times)
    p90 = statistics.quantiles(ordered, n=10, method="inclusive")[-1] if len(ordered) > 1 else ordered[0]
    return f"median {statistics.median(ordered):.3f} s, p90 {p90:.3f} s"


def main(argv: list[str] | None = None) -> int:
    from lynn.envs.evmquest.evmquest_env import implemented_specs
    from lynn.envs.evmquest.ts_oracle import TS_COMPOSITES, TS_ROWS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--tasks", default="")
    ap.add_argument("--no-python", action="store_true", help="skip the Python latency comparison")
    ap.add_argument(
        "--composites", action="store_true", help="the covered composites instead of atomic tasks"
    )
    args = ap.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",") if s]
    atomic = [s.task_id for s in implemented_specs("atomic")]
    composite = [s.task_id for s in implemented_specs("composite")]
    split = "composite" if args.composites else "atomic"
    covered = (
        [t for t in composite if t in TS_COMPOSITES]
        if args.composites
        else [t for t in atomic if t in TS_ROWS]
    )
    tasks = [t for t in args.tasks.split(",") if t] or covered
    print(
        f"TypeScript oracle covers {sum(t in TS_ROWS for t in atomic)} of {len(atomic)} atomic tasks, "
        f"{sum(t in TS_COMPOSITES for t in composite)} of {len(composite)} composites"
    )
    results: dict[str, Any] = {}
    for language in ("typescript", *(() if args.no_python else ("python",))):
        t0 = time.perf_counter()
        passed, failures, times = _run(language, tasks, seeds, split)
        for line in failures:
            print("FAIL", line)
        total = len(tasks) * len(seeds)
        print(
            f"{language}: {passed}/{total} episodes solved ({len(tasks)} tasks x {len(seeds)} seeds); "
            f"script_s {_summary(times)}; {time.perf_counter() - t0:.0f} s in all"
        )
        results[language] = passed == total
    return 0 if all(results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
