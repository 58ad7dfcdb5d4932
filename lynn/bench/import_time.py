"""`import lynn` cost, side by side with its anchor `import gymnasium` (each in a fresh interpreter).

Budget: `import lynn` < 0.5 s over a bare interpreter. Also counts the modules each import loads and
checks that `import lynn` loads none of the heavy stacks (torch, web3, playwright, ray, transformers)
nor the layers that load lazily (`lynn.agents`, `lynn.eval`, ...).
Run: ``lynn bench import`` or ``.venv/bin/python benchmarks/bench_import.py`` [--repeats 15]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

from lynn.errors import UsageError

HEAVY = ("torch", "transformers", "web3", "playwright", "ray", "matplotlib")
LAZY = ("lynn.agents", "lynn.eval", "lynn.wrappers", "lynn.lm", "lynn.bench", "lynn.cli", "lynn.envs")


def median_seconds(code: str, repeats: int) -> float:
    """Median wall time of ``python -c code`` (interpreter start included)."""
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def loaded(module: str) -> tuple[int, list[str]]:
    """(modules in ``sys.modules`` after importing ``module``, which of the heavy/lazy ones are)."""
    code = (
        f"import sys, json; import {module}; "
        f"print(json.dumps([len(sys.modules), [m for m in {HEAVY + LAZY!r} if m in sys.modules]]))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    count, present = json.loads(out)
    return int(count), list(present)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The benchmark's flags."""
    parser.add_argument("--repeats", type=int, default=15, help="fresh interpreters per row")


def run(args: argparse.Namespace) -> int:
    """Time the three imports and print the table."""
    if args.repeats < 1:
        raise UsageError("--repeats must be at least 1")
    bare = median_seconds("pass", args.repeats)
    gym = median_seconds("import gymnasium", args.repeats)
    lynn = median_seconds("import lynn", args.repeats)
    (n_bare, _), (n_gym, _), (n_lynn, present) = loaded("sys"), loaded("gymnasium"), loaded("lynn")
    print(
        "| import | median wall (s, incl. interpreter start) | over bare interpreter (s) | modules loaded |"
    )
    print("|---|---|---|---|")
    print(f"| python -c pass | {bare:.3f} | 0 | {n_bare} |")
    print(f"| import gymnasium (anchor) | {gym:.3f} | {gym - bare:.3f} | {n_gym} |")
    print(f"| import lynn | {lynn:.3f} | {lynn - bare:.3f} | {n_lynn} |")
    print(f"\nlynn / gymnasium import cost ratio: {(lynn - bare) / (gym - bare):.2f}x; budget 0.5 s: "
          f"{'met' if lynn - bare < 0.5 else 'NOT met'}; lynn adds {n_lynn - n_gym} modules to gymnasium's; "
          f"heavy or lazy modules loaded: {', '.join(present) or 'none'}")  # fmt: skip
    return 0


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` like ``lynn bench import`` and run the benchmark."""
    from lynn.bench import main as bench_main

    return bench_main(__name__, argv)
