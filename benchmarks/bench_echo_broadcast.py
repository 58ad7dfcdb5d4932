"""Weight broadcast: one-to-many vs peer-assisted pipelined chain, measured on Ray (N <= 4) and simulated to N = 256.

The benchmark lives in :mod:`lynn.bench.echo_broadcast` so that ``lynn bench echo-broadcast`` runs it too (same flags).

    .venv/bin/python benchmarks/bench_echo_broadcast.py [--mb 8] [--mbps 20] [--chunks 16]
"""

from __future__ import annotations

import sys

from lynn.bench.echo_broadcast import main

if __name__ == "__main__":
    sys.exit(main())
