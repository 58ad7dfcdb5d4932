"""`import lynn` cost, side by side with its anchor `import gymnasium` (each in a fresh interpreter).

The benchmark lives in :mod:`lynn.bench.import_time` so that ``lynn bench import`` runs it too (same flags).

    .venv/bin/python benchmarks/bench_import.py [--repeats 15]
"""

from __future__ import annotations

import sys

from lynn.bench.import_time import main

if __name__ == "__main__":
    sys.exit(main())
