"""EVMQuest reset cost: snapshot revert on the embedded chain vs anvil, and revert vs a fresh deploy.

The anvil reset goes over one keep-alive HTTP connection and reads the task's pre-state in one JSON-RPC
batch (the reads its last reset made); the last line times the old path (web3's default provider, one
request per read) in the same run.

Run: ``lynn bench evm-reset`` or ``.venv/bin/python benchmarks/bench_evm_reset.py`` [--n 30]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time

from lynn.envs.evmquest.chain import AnvilChain, anvil_binary, make_chain
from lynn.envs.evmquest.evmquest_env import EVMQuestEnv
from lynn.envs.evmquest.world import PROFILES, deploy_world
from lynn.errors import UsageError


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def env_resets(backend: str, n: int, legacy: bool = False) -> float:
    """Median ``env.reset()``; ``legacy``: web3's default HTTP provider and one ``eth_call`` per read
    (the reset as it was before the keep-alive connection and the batched pre-state reads)."""
    env = EVMQuestEnv(task="erc20_transfer_fixed", backend=backend)
    env.reset(seed=0)  # genesis
    if legacy and isinstance(env.chain, AnvilChain):
        from web3 import Web3

        env.chain.w3.provider = Web3.HTTPProvider(env.chain.url, request_kwargs={"timeout": 30})
        env.chain.prefetch = lambda calls: contextlib.nullcontext([])  # type: ignore[method-assign]
    times = []
    for i in range(n):
        t0 = time.perf_counter()
        env.reset(seed=i)
        times.append(time.perf_counter() - t0)
    env.close()
    return median_ms(times)


def reverts(backend: str, n: int) -> tuple[float, float]:
    chain = make_chain(backend, 56)
    t0 = time.perf_counter()
    deploy_world(chain, PROFILES["bsc"])
    deploy_s = time.perf_counter() - t0
    snap = chain.snapshot()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        snap = chain.revert(snap)
        times.append(time.perf_counter() - t0)
    chain.close()
    return median_ms(times), deploy_s * 1000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The benchmark's flags."""
    parser.add_argument("--n", type=int, default=30, help="resets/reverts timed per backend")


def run(args: argparse.Namespace) -> int:
    """Time reverts, fresh deploys and env resets per backend and print the table."""
    if args.n < 1:
        raise UsageError("--n must be at least 1")
    backends = ["embedded"] + (["anvil"] if anvil_binary() else [])
    print(
        f"{'backend':<10} {'fresh deploy ms':>16} {'revert ms':>10} {'deploy/revert':>14} {'env.reset ms':>13}"
    )
    for backend in backends:
        revert_ms, deploy_ms = reverts(backend, args.n)
        reset_ms = env_resets(backend, args.n)
        print(
            f"{backend:<10} {deploy_ms:>16.1f} {revert_ms:>10.2f} {deploy_ms / revert_ms:>13.0f}x {reset_ms:>13.1f}"
        )
    if "anvil" in backends:
        # Same run: the anvil reset as it was (requests-based provider, unbatched reads), then ours again.
        legacy, ours = env_resets("anvil", args.n, legacy=True), env_resets("anvil", args.n)
        print(
            f"anvil env.reset: web3 default provider + one eth_call per read {legacy:.1f} ms; keep-alive + "
            f"batched reads {ours:.1f} ms ({ours / legacy:.2f}x); load average {os.getloadavg()[0]:.1f}"
        )
    print(
        "goals: embedded reset <= 15 ms, anvil reset <= 5 ms (env.reset includes the task's set-up and pre-state reads)"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` like ``lynn bench evm-reset`` and run the benchmark."""
    from lynn.bench import main as bench_main

    return bench_main(__name__, argv)
