"""Speculative decoding: ours (strict, MARS, typical; draft model and prompt lookup; batch 1 and 8) vs
target-only greedy and Hugging Face assisted generation / prompt lookup, on the same models and prompts.

    .venv/bin/python benchmarks/bench_specdec.py --target DIR --draft DIR --prompts FILE.jsonl
    .venv/bin/python benchmarks/bench_specdec.py --demo /tmp/specdec-demo --threads 1   # tiny models trained here

Same as ``lynn bench specdec``: prints the Markdown table with the ratios and the goal lines, and writes
``specdec.json`` and ``specdec.md`` under ``--out`` (default results/bench/specdec).
"""

from __future__ import annotations

import sys

from lynn.bench.specdec import main

if __name__ == "__main__":
    sys.exit(main())
