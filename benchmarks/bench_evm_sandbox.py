"""Per-script cost of the EVMQuest sandbox vs starting a plain `python -c 'import web3'` subprocess.

The benchmark lives in :mod:`lynn.bench.evm_sandbox` so that ``lynn bench evm-sandbox`` runs it too (same flags).

    .venv/bin/python benchmarks/bench_evm_sandbox.py [--n 20]
"""

from __future__ import annotations

import sys

from lynn.bench.evm_sandbox import main

if __name__ == "__main__":
    sys.exit(main())
