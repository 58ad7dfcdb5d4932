"""Held-out EVMQuest prompts for ``benchmarks/bench_specdec.py``, rendered as a ``--compact --slots --history``
model (``zoo:evm-lm``) reads them: from ``lynn collect`` oracle runs on the test split, each step's prompt with
its ``Done:`` line and the task line's literals as slot names, and the oracle's compact reply as the reference.
Atomic and composite steps are interleaved so that ``--n-prompts N`` takes both kinds.

    python scripts/evm_heldout_prompts.py HELD_DIR PROMPTS.jsonl
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from itertools import zip_longest

from lynn.envs.evmquest.compact import compact_reply
from lynn.lm.data import read_demos
from lynn.lm.slots import mask_messages
from lynn.lm.train import _with_history


def main(src: str, out: str) -> int:
    demos = read_demos(src, split="test", only_success=True)
    demos = [replace(d, messages=[*d.messages[:-1], compact_reply(d.messages[-1])]) for d in demos]
    demos = [replace(d, messages=mask_messages(d.messages)[0]) for d in _with_history(demos)]
    atomic = [d for d in demos if not d.task_id.startswith("composite")]
    composite = [d for d in demos if d.task_id.startswith("composite")]
    rows = [d for pair in zip_longest(atomic, composite) for d in pair if d is not None]
    with open(out, "w", encoding="utf-8") as fh:
        for d in rows:
            rec = {"messages": d.messages[:-1], "reference": d.messages[-1]["content"]}
            fh.write(json.dumps({**rec, "task_id": d.task_id, "seed": d.seed, "step": d.step}) + "\n")
    print(f"{len(rows)} prompts ({len(atomic)} atomic, {len(composite)} composite) -> {out}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    raise SystemExit(main(sys.argv[1], sys.argv[2]))
