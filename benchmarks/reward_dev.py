"""Reward-model feature choice on a train-only dev split: 4 folds of whole train templates.

The held-out templates (:data:`lynn.envs.worldmodel.data.HELDOUT_TEMPLATES`) are removed first; the
remaining train templates (sorted) are dealt into 4 folds (``temps[k::4]``); each fold is scored by a
model fitted on the other three, exactly as the bench fits it (``UNSEEN_SHARE``, seed 0 for the fit,
seeds 1..3 for the scored examples, each template drawn on its own). Prints the dev accuracy over all folds and per example kind::

    .venv/bin/python benchmarks/reward_dev.py --train /work/data/web_train --test /work/data/test_web \\
        --eps /tmp/wm2/eps /tmp/wm2/eps01_train /tmp/wm2/eps01_test /tmp/wm2/rand_train /tmp/wm2/rand_test

``--drop a,b``: features (base names) zeroed in every fit, to measure what each one adds.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from typing import Any


def dev_split(
    rows: list[dict[str, Any]],
    folds: int = 4,
    drop: frozenset[str] = frozenset(),
    unseen: float | None = None,
    seeds: int = 3,
) -> dict[str, Any]:
    """Leave-templates-out accuracy of the reward model over ``folds`` folds of ``rows``' templates.

    ``seeds``: each dev template's examples are drawn with seeds 1..``seeds`` (the corrupted answers and
    truncation points are random draws; more seeds, less noise in the comparison)."""
    import lynn.envs.worldmodel.reward_model as R
    from lynn.envs.worldmodel.data import template_of

    kinds = R.task_kinds()
    share = R.UNSEEN_SHARE if unseen is None else unseen
    temps = sorted({template_of(r["task_id"]) for r in rows})
    tot: collections.Counter[str] = collections.Counter()
    ok: collections.Counter[str] = collections.Counter()
    miss: collections.Counter[str] = collections.Counter()

    def strip(ex: list[tuple[dict[str, float], int, str]]) -> list[tuple[dict[str, float], int, str]]:
        if not drop:
            return ex
        return [({n: v for n, v in f.items() if n.split("*")[-1] not in drop}, y, w) for f, y, w in ex]

    for k in range(folds):
        dev_t = set(temps[k::folds])
        tr = [r for r in rows if template_of(r["task_id"]) not in dev_t]
        dv = [r for r in rows if template_of(r["task_id"]) in dev_t]
        sh = R.answer_shapes(tr)
        rm = R.RewardModel.fit(strip(R.reward_examples(tr, kinds, 0, sh, unseen=share)), kinds, shapes=sh)
        for t in sorted(dev_t):
            mine = [r for r in dv if template_of(r["task_id"]) == t]
            ex = [e for seed in range(1, seeds + 1) for e in R.reward_examples(mine, kinds, seed, sh)]
            for f, y, why in strip(ex):
                good = (rm.score_features(f) >= rm.threshold) == bool(y)
                tot[why] += 1
                ok[why] += good
                if not good:
                    miss[f"{t} ({kinds.get(t, 'info')}): {why}"] += 1
    return {
        "accuracy": sum(ok.values()) / max(1, sum(tot.values())),
        "n": sum(tot.values()),
        "by_kind": {k: f"{ok[k]}/{tot[k]}" for k in tot},
        "misses": dict(miss.most_common()),
    }


def main(argv: list[str] | None = None) -> int:
    from lynn.envs.worldmodel.data import read_transitions, training_split

    ap = argparse.ArgumentParser(description="reward model: leave-templates-out dev accuracy (train only)")
    ap.add_argument("--train", required=True)
    ap.add_argument("--test", required=True)
    ap.add_argument("--eps", nargs="*", default=[], help="`lynn collect --epsilon` outputs (real failures)")
    ap.add_argument("--drop", default="", help="comma list of base feature names to leave out")
    ap.add_argument("--unseen", type=float, default=None, help="override UNSEEN_SHARE")
    ap.add_argument("--seeds", type=int, default=3, help="draws of the dev examples (seeds 1..N)")
    ap.add_argument("--json", help="write the result here")
    args = ap.parse_args(argv)
    rows = training_split(read_transitions(args.train, args.test))
    if args.eps:
        rows += training_split(read_transitions(*args.eps))
    res = dev_split(
        rows, drop=frozenset(filter(None, args.drop.split(","))), unseen=args.unseen, seeds=args.seeds
    )
    print(f"dev (unseen train templates, 4 folds) accuracy {res['accuracy']:.3f} of {res['n']}")
    print("by example kind:", res["by_kind"])
    print("misses (template (kind): example kind):", json.dumps(res["misses"], indent=0))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(res, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
