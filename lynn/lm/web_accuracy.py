"""How often a ranked-format LiveWeb model picks the expert's action, step by step, without a browser.

The diagnosis behind the LiveWeb rows of BENCHMARKS.md: the policy's own chooser
(:class:`lynn.lm.web_candidates.RankedChooser`) is run on recorded expert steps with the expert's history
(teacher forcing), and its action is compared with the expert's, per action kind. An episode of ~4.4 steps
succeeds at roughly this accuracy to the 4.4th power, so a model must be near-perfect on steps to solve tasks;
on *train* steps the figure says whether the model fits its data at all (underfitting), on held-out steps
whether it generalises.

``python -m lynn.lm.web_accuracy MODEL TRANSITIONS... [--limit 250] [--seed 0]``
"""

from __future__ import annotations

import argparse
import json
import random
from collections import Counter
from collections.abc import Sequence
from typing import Any

from lynn.lm.web_candidates import RankedChooser, load_steps


def action_kind(reply: str) -> str:
    """``click``/``fill``/``select``/``answer``/... of a reply."""
    return reply.split(" ", 1)[0] if reply else "none"


def step_accuracy(chooser: RankedChooser, steps: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Share of ``steps`` on which ``chooser`` picks the expert's reply, overall and per action kind."""
    right: Counter[str] = Counter()
    seen: Counter[str] = Counter()
    misses: list[dict[str, Any]] = []
    for st in steps:
        if st["reply"] is None:
            continue
        kind = action_kind(st["reply"])
        reply, _ = chooser.choose(st["obs"], st["replies"])
        seen[kind] += 1
        if reply == st["reply"]:
            right[kind] += 1
        elif len(misses) < 40:
            misses.append({"goal": st["goal"], "want": st["reply"], "got": reply})
    n = sum(seen.values())
    return {
        "steps": n,
        "right": sum(right.values()),
        "accuracy": sum(right.values()) / n if n else 0.0,
        "by_kind": {k: f"{right[k]}/{seen[k]}" for k in sorted(seen)},
        "misses": misses,
    }


def main(argv: Sequence[str] | None = None) -> int:
    from lynn.lm.backends import TransformersGenerator
    from lynn.zoo import resolve

    ap = argparse.ArgumentParser(prog="python -m lynn.lm.web_accuracy", description=__doc__)
    ap.add_argument("model", help="model folder with lynn_web.json, or zoo:NAME")
    ap.add_argument("transitions", nargs="+", help="transitions.jsonl files or folders")
    ap.add_argument("--limit", type=int, default=250, help="steps sampled (seeded); 0 = all")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--misses", action="store_true", help="print the first misses too")
    ap.add_argument("--memory-weight", type=float, help="override the format's kNN-LM weight")
    args = ap.parse_args(argv)
    model = str(resolve(args.model))
    steps = [s for s in load_steps(args.transitions) if s["reply"] is not None]
    if args.limit and len(steps) > args.limit:
        steps = random.Random(args.seed).sample(steps, args.limit)
    gen = TransformersGenerator(model, threads=args.threads)
    chooser = RankedChooser.from_folder(gen.model, gen.tokenizer, model)
    if args.memory_weight is not None:
        chooser.fmt.memory_weight = args.memory_weight
    out = step_accuracy(chooser, steps)
    if not args.misses:
        out.pop("misses")
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
