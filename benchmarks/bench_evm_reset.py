"""EVMQuest reset cost: snapshot revert on the embedded chain vs anvil, and revert vs a fresh deploy.

The benchmark lives in :mod:`lynn.bench.evm_reset` so that ``lynn bench evm-reset`` runs it too (same flags).

    .venv/bin/python benchmarks/bench_evm_reset.py [--n 30] [--rounds 3]
"""

from __future__ import annotations

import sys

from lynn.bench.evm_reset import main

if __name__ == "__main__":
    sys.exit(main())
