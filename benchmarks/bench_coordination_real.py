"""Real-pool routing benchmark: routers on replayed streams of real EVMQuest executions by real Lynn agents.

    .venv/bin/python benchmarks/bench_coordination_real.py --target models/lm-evm2 --draft models/draft-evm

The first run fills the result cache (every worker on every instance, in its own process; minutes);
later runs replay it for free. Prints the Markdown table (success, cost per correct, latency, regret,
each single worker alone) and writes it under --out.
"""

from __future__ import annotations

import sys

from lynn.bench.coordination_real import main

if __name__ == "__main__":
    sys.exit(main())
