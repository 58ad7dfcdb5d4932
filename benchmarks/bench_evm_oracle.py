"""Full oracle run over every EVMQuest task, per chain backend (success rate and wall time).

The benchmark lives in :mod:`lynn.bench.evm_oracle` so that ``lynn bench evm-oracle`` runs it too (same flags).

    .venv/bin/python benchmarks/bench_evm_oracle.py [--backends embedded,anvil]
"""

from __future__ import annotations

import sys

from lynn.bench.evm_oracle import main

if __name__ == "__main__":
    sys.exit(main())
