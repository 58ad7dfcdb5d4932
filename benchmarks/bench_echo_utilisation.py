"""Learner utilisation, push_pull vs pull, and the capacity rule's prediction vs measurement.

The benchmark lives in :mod:`lynn.bench.echo_utilisation` so that ``lynn bench echo-utilisation`` runs it too (same flags).

    .venv/bin/python benchmarks/bench_echo_utilisation.py [--updates 40] [--plot PATH]
"""

from __future__ import annotations

import sys

from lynn.bench.echo_utilisation import main

if __name__ == "__main__":
    sys.exit(main())
