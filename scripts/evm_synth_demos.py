"""Write the EVMQuest oracle's first-step demonstrations of atomic tasks without a chain.

``python scripts/evm_synth_demos.py --seeds 100000:100060 --out DIR`` writes ``DIR/demos.jsonl`` (every
atomic task unless ``--tasks``), byte-identical to what ``lynn collect Lynn/EVMQuest-v0 --agent oracle``
records for the same seeds (:func:`lynn.envs.evmquest.demos.synth_evm_demos`).
"""

from __future__ import annotations

import argparse

from lynn.envs.evmquest.demos import synth_evm_demos
from lynn.envs.evmquest.spec import load_specs
from lynn.lm.data import write_demos


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", required=True, help="A:B (train seeds, >= 100000)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--tasks", help="comma-separated atomic task ids (default: all)")
    args = ap.parse_args()
    a, b = (int(x) for x in args.seeds.split(":"))
    tasks = (
        args.tasks.split(",")
        if args.tasks
        else sorted(t for t, s in load_specs().items() if s.split == "atomic")
    )
    n = write_demos(args.out, synth_evm_demos(tasks, range(a, b)), append=False)
    print(f"{n} demonstrations of {len(tasks)} tasks -> {args.out}")


if __name__ == "__main__":
    main()
