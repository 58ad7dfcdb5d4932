"""Per-script cost of the EVMQuest sandbox vs starting a plain `python -c 'import web3'` subprocess.

Run: ``lynn bench evm-sandbox`` or ``.venv/bin/python benchmarks/bench_evm_sandbox.py`` [--n 20]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from lynn.envs.evmquest.chain import make_chain
from lynn.envs.evmquest.sandbox import Sandbox
from lynn.envs.evmquest.world import AGENT, PROFILES, deploy_world
from lynn.errors import UsageError

EMPTY = "def execute_skill(w3, agent_address, contracts):\n    return {'query_result': 1}\n"
READS = (
    "def execute_skill(w3, agent_address, contracts):\n"
    "    return {'query_result': [w3.eth.get_balance(agent_address), w3.eth.block_number, w3.eth.chain_id]}\n"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The benchmark's flags."""
    parser.add_argument("--n", type=int, default=20, help="scripts timed per row")


def run(args: argparse.Namespace) -> int:
    """Time the sandbox against the subprocess anchor and print the table."""
    if args.n < 1:
        raise UsageError("--n must be at least 1")
    chain = make_chain("embedded", 56)
    world = deploy_world(chain, PROFILES["bsc"])
    anchor = []
    for _ in range(max(3, args.n // 4)):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import web3"], check=True)
        anchor.append(time.perf_counter() - t0)
    with Sandbox() as sandbox:
        rows = {}
        for label, source in (("empty script", EMPTY), ("3 RPC reads", READS)):
            times = []
            for _ in range(args.n):
                t0 = time.perf_counter()
                result = sandbox.run(source, AGENT.address, world.contracts, chain.raw_request)
                times.append(time.perf_counter() - t0)
                assert result.ok, result.error
            rows[label] = statistics.median(times) * 1000
    anchor_ms = statistics.median(anchor) * 1000
    print(f"{'measure':<34} {'median ms':>10} {'vs anchor':>10}")
    print(f"{'anchor: python -c import web3':<34} {anchor_ms:>10.1f} {'1.00x':>10}")
    for label, ms in rows.items():
        print(f"{'sandbox: ' + label:<34} {ms:>10.1f} {anchor_ms / ms:>9.1f}x faster")
    print("goal: sandbox overhead <= 50 ms per script")
    chain.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` like ``lynn bench evm-sandbox`` and run the benchmark."""
    from lynn.bench import main as bench_main

    return bench_main(__name__, argv)
