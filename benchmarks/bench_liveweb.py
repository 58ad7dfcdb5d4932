"""LiveWeb step and reset latency: ours vs raw Playwright (and BrowserGym in its own venv, if given).

The benchmark lives in :mod:`lynn.bench.liveweb` so that ``lynn bench liveweb`` runs it too; see
that module for what is measured and how to set up BrowserGym's venv.

    .venv/bin/python benchmarks/bench_liveweb.py [--cycles 12 --resets 12] [--json FILE]
    .venv/bin/python benchmarks/bench_liveweb.py --browsergym-python /tmp/bgym-venv/bin/python --browsergym-browsers /tmp/pwb
"""

from __future__ import annotations

import sys

from lynn.bench.liveweb import main

if __name__ == "__main__":
    sys.exit(main())
