"""Split scores of the oracle's scripts and of random actions under both scoring profiles.

``python -m lynn.envs.evmquest.fidelity [--seeds N]`` prints the table recorded in
``docs/evmquest-fidelity.md``. The oracle here is the task's reference solution
(:func:`lynn.envs.evmquest.spec.oracle_steps`, what ``--agent oracle`` plays) and "random" samples
the env's action space (what ``--agent random`` plays); both are driven in-process so that this
module, like every env module, imports no agent.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from lynn.envs.evmquest.evmquest_env import EVMQuestEnv, implemented_specs
from lynn.envs.evmquest.spec import oracle_steps


def _episode(env: EVMQuestEnv, task_id: str, seed: int, agent: str) -> dict[str, Any]:
    obs, info = env.reset(seed=seed, options={"task_id": task_id})
    env.action_space.seed(seed)
    scripts = oracle_steps(*env.task_instance) if agent == "oracle" else []
    done, reward, info, cursor = False, 0.0, {}, 0
    while not done:
        if agent == "oracle":  # the next script only after the last one went through (as the oracle agent)
            action = scripts[cursor] if cursor < len(scripts) else json.dumps({"done": True})
        else:
            action = env.action_space.sample()
        obs, reward, terminated, truncated, info = env.step(action)
        cursor += info.get("outcome") in ("tx_ok", "answer")
        done = terminated or truncated
    return {"score": float(info.get("score", 0.0)), "success": bool(info.get("success"))}


def measure(seeds: int = 1) -> list[dict[str, Any]]:
    """One row per (profile, split, agent): mean score (0–100) and success rate over tasks × seeds."""
    rows = []
    for scoring in ("default", "reference"):
        env = EVMQuestEnv(split="all", scoring=scoring)
        try:
            for split in ("atomic", "composite"):
                ids = [s.task_id for s in implemented_specs(split)]
                for agent in ("oracle", "random"):
                    t0 = time.perf_counter()
                    runs = [_episode(env, t, s, agent) for t in ids for s in range(seeds)]
                    rows.append(
                        {
                            "split": split if scoring == "default" else f"{split}/{scoring}",
                            "agent": agent,
                            "episodes": len(runs),
                            "score": sum(r["score"] for r in runs) / len(runs),
                            "success": sum(r["success"] for r in runs) / len(runs),
                            "seconds": time.perf_counter() - t0,
                        }
                    )
        finally:
            env.close()
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=1, help="seeds per task (default 1)")
    args = parser.parse_args(argv)
    print("| split | agent | episodes | mean score | success |")
    print("|---|---|---|---|---|")
    for row in measure(args.seeds):
        print(
            f"| {row['split']} | {row['agent']} | {row['episodes']} | {row['score']:.1f} | {100 * row['success']:.1f}% |"
        )


if __name__ == "__main__":
    main()
