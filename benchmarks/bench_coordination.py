"""Routing benchmark: the LinUCB router and baselines vs MABWiser LinUCB and Vowpal Wabbit cb_explore_adf.

    .venv/bin/python benchmarks/bench_coordination.py            # 3 seeds, ~5 scenarios (a few minutes)
    .venv/bin/python benchmarks/bench_coordination.py --seeds 5 --out results/bench/coordination

Same as ``lynn bench coordination``: prints Markdown tables and the goal ratios (regret vs the best
library, decisions/s vs MABWiser, recovery after the shock) and writes a PNG of regret curves.
"""

from __future__ import annotations

import sys

from lynn.bench.coordination import main

if __name__ == "__main__":
    sys.exit(main())
