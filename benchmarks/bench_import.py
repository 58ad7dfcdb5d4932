"""`import lynn` cost, side by side with its anchor `import gymnasium` (each in a fresh interpreter).

Budget: `import lynn` < 0.5 s. Run: `.venv/bin/python benchmarks/bench_import.py`.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def median_seconds(code: str, repeats: int = 15) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    bare = median_seconds("pass")
    gym = median_seconds("import gymnasium")
    lynn = median_seconds("import lynn")
    print("| import | median wall (s, incl. interpreter start) | over bare interpreter (s) |")
    print("|---|---|---|")
    print(f"| python -c pass | {bare:.3f} | 0 |")
    print(f"| import gymnasium (anchor) | {gym:.3f} | {gym - bare:.3f} |")
    print(f"| import lynn | {lynn:.3f} | {lynn - bare:.3f} |")
    print(f"\nlynn / gymnasium import cost ratio: {(lynn - bare) / (gym - bare):.2f}x; budget 0.5 s: "
          f"{'met' if lynn - bare < 0.5 else 'NOT met'}")  # fmt: skip


if __name__ == "__main__":
    main()
