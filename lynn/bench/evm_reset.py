"""EVMQuest reset cost: snapshot revert on the embedded chain vs anvil, and revert vs a fresh deploy.

The anvil reset is then timed three ways in one run, rounds interleaved, against the anchor of a bare
``evm_revert`` + ``evm_snapshot`` round trip (two JSON-RPC requests on one keep-alive connection, no
web3 in between): as issue 27 found it (web3's ``requests`` provider, one request per pre-state read,
revert then snapshot again), with the keep-alive connection only, and ours (keep-alive, the task's
pre-state reads in one JSON-RPC batch, one ``evm_revert`` from a pool of snapshots).

Run: ``lynn bench evm-reset`` or ``.venv/bin/python benchmarks/bench_evm_reset.py`` [--n 30] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from lynn.envs.evmquest.chain import AnvilChain, anvil_binary, make_chain
from lynn.envs.evmquest.evmquest_env import EVMQuestEnv
from lynn.envs.evmquest.world import PROFILES, deploy_world
from lynn.errors import UsageError

TASK = "erc20_transfer_fixed"

#: The anvil resets timed against the anchor: name -> (the chain's set-up, what the row says).
ANVIL_MODES = {
    "as filed": "web3's requests provider, one request per pre-state read, evm_revert + evm_snapshot",
    "keep-alive": "one keep-alive connection, one request per pre-state read, evm_revert + evm_snapshot",
    "ours": "keep-alive, the pre-state reads in one JSON-RPC batch, one evm_revert from a snapshot pool",
}


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def env_resets(backend: str, n: int) -> float:
    """Median ``env.reset()`` on ``backend`` as the env does it."""
    env = EVMQuestEnv(task=TASK, backend=backend)
    env.reset(seed=0)  # genesis
    times = _time_resets(env, range(n))
    env.close()
    return median_ms(times)


def _time_resets(env: EVMQuestEnv, seeds: range) -> list[float]:
    times = []
    for seed in seeds:
        t0 = time.perf_counter()
        env.reset(seed=seed)
        times.append(time.perf_counter() - t0)
    return times


def anvil_env(mode: str) -> EVMQuestEnv:
    """An anvil env whose reset runs as ``mode`` (a key of :data:`ANVIL_MODES`), past its genesis."""
    env = EVMQuestEnv(task=TASK, backend="anvil")
    env.reset(seed=0)
    chain = env.chain
    assert isinstance(chain, AnvilChain)
    if mode != "ours":
        env._snapshot = chain.revert(env._snapshot)  # back at the genesis state: a plain snapshot id there
        chain.snapshot_pool, chain.batch_reads = 1, False
        if mode == "as filed":
            from web3 import Web3

            chain.w3.provider.close()  # type: ignore[attr-defined]
            chain.w3.provider = Web3.HTTPProvider(chain.url, request_kwargs={"timeout": 30})
        env._snapshot = chain.snapshot()
    return env


def anchor_round_trips(chain: AnvilChain, n: int) -> list[float]:
    """``n`` bare ``evm_revert`` + ``evm_snapshot`` round trips, in seconds."""
    sid = chain.raw_request("evm_snapshot", [])
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        chain.raw_request("evm_revert", [sid])
        sid = chain.raw_request("evm_snapshot", [])
        times.append(time.perf_counter() - t0)
    return times


def anvil_table(n: int, rounds: int) -> dict[str, float]:
    """Median ms of the anchor and of each :data:`ANVIL_MODES` reset, ``rounds`` interleaved rounds of ``n``."""
    anchor_chain = AnvilChain(PROFILES["bsc"].chain_id)
    deploy_world(anchor_chain, PROFILES["bsc"])  # the same state as the envs' chains
    envs = {mode: anvil_env(mode) for mode in ANVIL_MODES}
    samples: dict[str, list[float]] = {"anchor": [], **{mode: [] for mode in ANVIL_MODES}}
    try:
        for r in range(rounds):
            samples["anchor"] += anchor_round_trips(anchor_chain, n)
            for mode, env in envs.items():
                samples[mode] += _time_resets(env, range(1 + r * n, 1 + (r + 1) * n))
    finally:
        for env in envs.values():
            env.close()
        anchor_chain.close()
    return {name: median_ms(times) for name, times in samples.items()}


def reverts(backend: str, n: int) -> tuple[float, float]:
    """(median ms of ``Chain.revert`` as a reset makes it, ms of deploying the genesis afresh)."""
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
    parser.add_argument("--n", type=int, default=30, help="resets/reverts timed per backend (and per round)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the anvil comparison")


def run(args: argparse.Namespace) -> int:
    """Time reverts, fresh deploys and env resets per backend, then the anvil resets against the anchor."""
    if args.n < 1 or args.rounds < 1:
        raise UsageError("--n and --rounds must be at least 1")
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
        load = os.getloadavg()[0]
        ms = anvil_table(args.n, args.rounds)
        print(
            f"\nanvil env.reset ({TASK}), {args.rounds} interleaved rounds of {args.n}, load average {load:.1f}"
        )
        print(f"{'':<11} {'median ms':>9} {'x anchor':>9} {'x as filed':>11}")
        print(
            f"{'anchor':<11} {ms['anchor']:>9.2f} {1:>9.2f} {'':>11}  bare evm_revert + evm_snapshot round trip"
        )
        for mode, what in ANVIL_MODES.items():
            print(
                f"{mode:<11} {ms[mode]:>9.2f} {ms[mode] / ms['anchor']:>9.2f} {ms[mode] / ms['as filed']:>11.2f}  {what}"
            )
    print(
        "goals: embedded reset <= 15 ms, anvil reset <= 5 ms (env.reset includes the task's set-up and pre-state reads)"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` like ``lynn bench evm-reset`` and run the benchmark."""
    from lynn.bench import main as bench_main

    return bench_main(__name__, argv)
