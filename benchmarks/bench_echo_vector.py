"""Steps/s of EchoVectorEnv (async send/recv, batch_size = num_envs/2) vs gymnasium's AsyncVectorEnv.

Two envs: one with heavy-tailed step latency (lognormal sleep, median 2 ms, σ = 1.2: a few steps
take 20-50 ms, like a browser or chain step) and plain CartPole. Anchor: AsyncVectorEnv stepping all
envs in lock-step (every batch waits for its slowest env). Ours: EnvPool-style `recv()` of the first
num_envs/2 ready envs, `send()` back to just those. Goal: >= 1.5x on the heavy-tailed env, no slower
on CartPole.

    .venv/bin/python benchmarks/bench_echo_vector.py [--seconds 5] [--envs 8]
"""

from __future__ import annotations

import argparse
import time
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


def run_anchor(make, n: int, seconds: float) -> float:
    envs = gym.vector.AsyncVectorEnv([make] * n, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    try:
        envs.reset(seed=0)
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            envs.step(envs.action_space.sample())
            steps += n
        return steps / (time.perf_counter() - start)
    finally:
        envs.close()


def run_echo(make, n: int, seconds: float) -> float:
    envs = EchoVectorEnv([make] * n, batch_size=n // 2)
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


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--envs", type=int, default=8)
    args = parser.parse_args(argv)
    cases = [
        ("heavy-tailed (lognormal 2 ms, σ=1.2)", HeavyTailEnv, 1.5),
        ("CartPole-v1", lambda: gym.make("CartPole-v1"), 1.0),
    ]
    rows = []
    for name, make, goal in cases:
        anchor = run_anchor(make, args.envs, args.seconds)
        ours = run_echo(make, args.envs, args.seconds)
        rows.append({"env": name, "anchor": anchor, "ours": ours, "ratio": ours / anchor, "goal": goal})
    print(f"num_envs={args.envs}, EchoVectorEnv batch_size={args.envs // 2}, {args.seconds:g} s per cell")
    print("| env | AsyncVectorEnv steps/s | EchoVectorEnv steps/s | ratio | goal |")
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        met = "met" if r["ratio"] >= r["goal"] else "NOT met"
        print(
            f"| {r['env']} | {r['anchor']:.0f} | {r['ours']:.0f} | {r['ratio']:.2f}x | ≥ {r['goal']:g}x ({met}) |"
        )
    return rows


if __name__ == "__main__":
    main()
