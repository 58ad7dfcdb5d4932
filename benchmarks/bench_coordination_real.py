"""Real-pool routing benchmark: routers on replayed streams of real EVMQuest executions by real Lynn agents.

    .venv/bin/python benchmarks/bench_coordination_real.py [--target DIR --draft DIR]   # = lynn bench coordination_real

Without --target the pool runs the zoo's EVMQuest LM (zoo:evm-lm, models/; nothing is trained). The first run fills the result cache (every worker on every instance, in its own process;
minutes to hours, see BENCHMARKS.md); later runs replay it for free. Prints the Markdown table
(success, cost per correct, latency, regret, each single worker alone; with --shock the recovery
columns) and writes it under --out. --standby prints the simulated standby-shock recovery on
realised and on expected success instead.
"""

from __future__ import annotations

import sys

from lynn.bench.coordination_real import main

if __name__ == "__main__":
    sys.exit(main())
