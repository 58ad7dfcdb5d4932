"""Weight broadcast: one-to-many vs peer-assisted pipelined chain, measured on Ray (N <= 4) and simulated to N = 256.

Measured: Ray actors on this machine, each sender's uplink paced at B bytes/s (one machine has no
WAN link, so the link is emulated; the relaying, chunking and Ray transfers are real). Simulated: the
discrete-event model of `lynn.wrappers.echo.broadcast` with the same M, B, c. The table prints
measured vs simulated seconds; the PNG plots both curves up to N = 256 on log axes.

    .venv/bin/python benchmarks/bench_echo_broadcast.py [--mb 8] [--mbps 20] [--chunks 16]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from typing import Any

from lynn.bench import pyplot, save_figure
from lynn.errors import UsageError
from lynn.wrappers.echo.broadcast import RayBroadcast, simulate_broadcast


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The benchmark's flags."""
    parser.add_argument("--mb", type=float, default=8.0, help="model size M in MB")
    parser.add_argument("--mbps", type=float, default=20.0, help="emulated uplink B in MB/s")
    parser.add_argument("--chunks", type=int, default=16)
    parser.add_argument("--max-n", type=int, default=4)
    parser.add_argument(
        "--plot", default="benchmarks/figures/echo_broadcast.png", help="PNG path ('' for none)"
    )


def run(args: argparse.Namespace) -> int:
    """Measure on Ray, simulate to N = 256, print the table and write the plot."""
    import ray

    from lynn.raytools import ray_init

    if args.mb <= 0 or args.mbps <= 0 or args.chunks < 1 or args.max_n < 1:
        raise UsageError("--mb and --mbps must be positive, --chunks and --max-n at least 1")
    m, b = int(args.mb * 1e6), args.mbps * 1e6
    chunk = -(-m // args.chunks)
    payload = os.urandom(m)
    rows = []
    with tempfile.TemporaryDirectory(prefix="ray") as tmp:
        ray_init(num_cpus=2, temp_dir=tmp)
        try:
            for n in range(1, args.max_n + 1):
                bc = RayBroadcast(n, bandwidth=b, chunk_bytes=chunk)
                row: dict[str, Any] = {"n": n}
                for strategy in ("one_to_many", "chain"):
                    seconds, digests = bc.run(strategy, payload)
                    assert len(set(digests)) == 1, "workers got different bytes"
                    row[strategy] = seconds
                    row[strategy + "_sim"] = simulate_broadcast(strategy, n, m, b, chunk)
                rows.append(row)
        finally:
            ray.shutdown()
    print(f"M = {args.mb:g} MB, B = {args.mbps:g} MB/s per uplink (emulated), {args.chunks} chunks")
    print(
        "| N | one-to-many measured s | simulated s | chain measured s | simulated s | one-to-many / chain |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['n']} | {r['one_to_many']:.3f} | {r['one_to_many_sim']:.3f} | {r['chain']:.3f} | "
            f"{r['chain_sim']:.3f} | {r['one_to_many'] / r['chain']:.2f}x |"
        )
    big = [1, 2, 4, 8, 16, 32, 64, 128, 256]
    sim = {s: [simulate_broadcast(s, n, m, b, chunk) for n in big] for s in ("one_to_many", "chain")}
    print(f"simulated N = 256: one-to-many {sim['one_to_many'][-1]:.1f} s, chain {sim['chain'][-1]:.2f} s")
    if args.plot:
        plt = pyplot()

        fig, ax = plt.subplots(figsize=(6, 4))
        ax.plot(big, sim["one_to_many"], "-", color="C3", label="one-to-many simulated")
        ax.plot(big, sim["chain"], "-", color="C2", label="pipelined chain simulated")
        ax.plot(
            [r["n"] for r in rows],
            [r["one_to_many"] for r in rows],
            "o",
            color="C3",
            label="one-to-many on Ray",
        )
        ax.plot([r["n"] for r in rows], [r["chain"] for r in rows], "s", color="C2", label="chain on Ray")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("workers N")
        ax.set_ylabel("seconds until every worker has the weights")
        ax.set_title(f"Broadcast of {args.mb:g} MB at {args.mbps:g} MB/s per uplink")
        ax.legend(fontsize=8)
        save_figure(fig, args.plot)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` like ``lynn bench echo-broadcast`` and run the benchmark."""
    from lynn.bench import main as bench_main

    return bench_main(__name__, argv)
