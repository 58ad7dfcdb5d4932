"""EVMQuest's embedded chain with and without its shortcuts, in one process, in CPU seconds.

The anchor is ``EmbeddedChain`` with ``fast_reads=False`` (every read on a fresh eth-tester state, through
web3 where it went before) and ``reuse_genesis=False`` (every env deploys its own genesis); ours is the
default. Two measures: a new env's first reset (genesis), and the soundness tests' pattern (per task: a
reset, the oracle's episode, then a reset and an episode per generic mutant). Rounds alternate anchor and
ours; the answers of both are compared (rewards, scores, checks, pre-states).

    .venv/bin/python benchmarks/bench_evm_embedded.py [--every 12] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np

from lynn.envs.evmquest.chain import EmbeddedChain
from lynn.envs.evmquest.evmquest_env import EVMQuestEnv, implemented_specs
from lynn.envs.evmquest.spec import generic_mutants, oracle_steps


def _set(shortcuts: bool) -> None:
    EmbeddedChain.fast_reads = shortcuts
    EmbeddedChain.reuse_genesis = shortcuts


def _episode(env: EVMQuestEnv, scripts: list[str]) -> str:
    reward, info = 0.0, {}
    for script in [*scripts, json.dumps({"done": True})]:
        _, reward, terminated, truncated, info = env.step(script)
        if terminated or truncated:
            break
    shown = [reward, info.get("score"), info.get("checks"), env.before]
    return json.dumps(shown, sort_keys=True, default=str)


def soundness_pattern(env: EVMQuestEnv, tasks: list[str]) -> tuple[float, list[str]]:
    c0, seen = time.process_time(), []
    for task_id in tasks:
        env.reset(seed=5, options={"task_id": task_id})
        mutants = generic_mutants(env.instance, env.names, env.before, np.random.default_rng(1))
        seen.append(_episode(env, oracle_steps(env.instance, env.names, env.before)))
        for _, scripts in mutants:
            env.reset(seed=5, options={"task_id": task_id})
            seen.append(_episode(env, scripts))
    return time.process_time() - c0, seen


def first_reset() -> float:
    c0 = time.process_time()
    env = EVMQuestEnv(task="erc20_transfer_fixed")
    env.reset(seed=0)
    env.close()
    return time.process_time() - c0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=int, default=12, help="take every n-th task of the 107 (12: 9 tasks)")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds of anchor and ours")
    args = parser.parse_args(argv)
    tasks = [s.task_id for s in implemented_specs("all")][:: args.every]
    _set(True)
    first_reset()  # ours: the process's genesis now exists (the anchor deploys its own every time)
    times: dict[bool, dict[str, list[float]]] = {False: {}, True: {}}
    answers: dict[bool, list[str]] = {}
    for _ in range(args.rounds):
        for shortcuts in (False, True):
            _set(shortcuts)
            row = times[shortcuts]
            row.setdefault("genesis", []).append(first_reset())
            env = EVMQuestEnv(split="all")
            env.reset(seed=0)
            cpu, seen = soundness_pattern(env, tasks)
            env.close()
            row.setdefault("pattern", []).append(cpu)
            if answers.setdefault(shortcuts, seen) != seen:
                raise SystemExit("a round's answers differ from the first round's")
    _set(True)
    same = answers[False] == answers[True]
    print(f"{len(tasks)} tasks, {len(answers[True])} episodes, {args.rounds} rounds; same answers: {same}")
    print("| measure | anchor CPU s | ours CPU s | anchor / ours |")
    print("|---|---:|---:|---:|")
    for name, label in (("genesis", "new env + first reset"), ("pattern", "soundness pattern")):
        a, o = statistics.median(times[False][name]), statistics.median(times[True][name])
        print(f"| {label} | {a:.2f} | {o:.2f} | {a / o:.1f}x |")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
