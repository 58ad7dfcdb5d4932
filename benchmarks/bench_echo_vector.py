"""Env-steps/s of EchoVectorEnv vs Gymnasium's AsyncVectorEnv and SB3's SubprocVecEnv, several runs.

Two envs: one with heavy-tailed step latency (lognormal sleep, median 2 ms, σ = 1.2: a few steps
take 20-50 ms, like a browser or chain step) and plain CartPole. Anchors: ``AsyncVectorEnv``
(SAME_STEP autoreset) and SB3's ``SubprocVecEnv``, both stepping all envs in lock-step (every batch
waits for its slowest env). Ours: ``EchoVectorEnv.step`` (the same lock-step, to show the
synchronous path costs nothing extra) and EnvPool-style ``recv()`` of the first ``num_envs/2``
ready envs with ``send()`` back to just those. Goal: >= 1.5x AsyncVectorEnv on the heavy-tailed env,
no slower on CartPole. All vector envs use the ``fork`` start method.

Each run measures every cell once, in turn, so the ratios of one run share the machine's load;
the table gives min / median / max over runs of steps/s and of the per-run ratio to AsyncVectorEnv.

    .venv/bin/python benchmarks/bench_echo_vector.py [--seconds 3] [--envs 8] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from lynn.wrappers.echo.vector import EchoVectorEnv


class HeavyTailEnv(gym.Env):
    """Each step sleeps a lognormal time (median ``median_s``, shape ``sigma``); episodes of 100 steps."""

    def __init__(self, median_s: float = 0.002, sigma: float = 1.2) -> None:
        self.observation_space = spaces.Box(-1, 1, shape=(8,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self.median_s, self.sigma = median_s, sigma

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(8, np.float32), {}

    def step(self, action: int):
        time.sleep(self.median_s * float(np.exp(self.sigma * self.np_random.standard_normal())))
        self.t += 1
        obs = self.np_random.uniform(-1, 1, 8).astype(np.float32)
        return obs, 1.0, False, self.t >= 100, {}


def make_cartpole() -> gym.Env:
    return gym.make("CartPole-v1")


def run_async(make: Callable[[], gym.Env], n: int, seconds: float) -> float:
    envs = gym.vector.AsyncVectorEnv(
        [make] * n, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP, context="fork"
    )
    try:
        envs.reset(seed=0)
        rng = np.random.default_rng(0)
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            envs.step(rng.integers(0, 2, size=n))
            steps += n
        return steps / (time.perf_counter() - start)
    finally:
        envs.close()


def run_subproc(make: Callable[[], gym.Env], n: int, seconds: float) -> float:
    from stable_baselines3.common.vec_env import SubprocVecEnv

    venv = SubprocVecEnv([make] * n, start_method="fork")
    try:
        venv.seed(0)
        venv.reset()
        rng = np.random.default_rng(0)
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            venv.step(rng.integers(0, 2, size=n))
            steps += n
        return steps / (time.perf_counter() - start)
    finally:
        venv.close()


def run_echo_sync(make: Callable[[], gym.Env], n: int, seconds: float) -> float:
    envs = EchoVectorEnv([make] * n, context="fork")
    try:
        envs.reset(seed=0)
        rng = np.random.default_rng(0)
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            envs.step(rng.integers(0, 2, size=n))
            steps += n
        return steps / (time.perf_counter() - start)
    finally:
        envs.close()


def run_echo_async(make: Callable[[], gym.Env], n: int, seconds: float) -> float:
    envs = EchoVectorEnv([make] * n, batch_size=n // 2, context="fork")
    try:
        envs.async_reset(seed=0)
        rng = np.random.default_rng(0)
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            _, _, _, _, info = envs.recv()
            ids = info["env_id"]
            envs.send(rng.integers(0, 2, size=len(ids)), ids)
            steps += len(ids)
        return steps / (time.perf_counter() - start)
    finally:
        envs.close()


RUNNERS: dict[str, Callable[[Callable[[], gym.Env], int, float], float]] = {
    "AsyncVectorEnv": run_async,
    "SB3 SubprocVecEnv": run_subproc,
    "EchoVectorEnv.step": run_echo_sync,
    "EchoVectorEnv send/recv": run_echo_async,
}


def _mmm(values: list[float], fmt: str) -> str:
    return " / ".join(format(v, fmt) for v in (min(values), statistics.median(values), max(values)))


def main(argv: list[str] | None = None) -> dict[str, dict[str, list[float]]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds per cell")
    parser.add_argument("--envs", type=int, default=8)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    cases: list[tuple[str, Callable[[], gym.Env], float]] = [
        ("heavy-tailed (lognormal 2 ms, σ=1.2)", HeavyTailEnv, 1.5),
        ("CartPole-v1", make_cartpole, 1.0),
    ]
    rates: dict[str, dict[str, list[float]]] = {c: {r: [] for r in RUNNERS} for c, _, _ in cases}
    for _ in range(args.runs):
        for case, make, _ in cases:
            for name, runner in RUNNERS.items():
                rates[case][name].append(runner(make, args.envs, args.seconds))
    load = os.getloadavg()
    print(
        f"num_envs={args.envs}, send/recv batch_size={args.envs // 2}, {args.seconds:g} s per cell, "
        f"{args.runs} runs; load average at the end {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} "
        f"on {os.cpu_count()} cores"
    )
    print(
        "| env | vector env | steps/s min / median / max | ratio to AsyncVectorEnv (per run) min / median / max | goal |"
    )
    print("|---|---|---:|---:|---|")
    for case, _, goal in cases:
        anchor = rates[case]["AsyncVectorEnv"]
        for name in RUNNERS:
            ratios = [o / a for o, a in zip(rates[case][name], anchor, strict=True)]
            goal_txt = ""
            if name == "EchoVectorEnv send/recv":
                met = "met" if statistics.median(ratios) >= goal else "NOT met"
                goal_txt = f"≥ {goal:g}x median ({met})"
            print(
                f"| {case} | {name} | {_mmm(rates[case][name], '.0f')} | {_mmm(ratios, '.2f')}x | {goal_txt} |"
            )
    return rates


if __name__ == "__main__":
    main()
