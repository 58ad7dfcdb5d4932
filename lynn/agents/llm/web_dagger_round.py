"""One DAgger round on LiveWeb (``python -m lynn.agents.llm.web_dagger_round``): the LM policy rolled out on
train instances, every visited state labelled by the expert (:mod:`lynn.lm.web_dagger` does the labelling;
this module only wires the env, the learner and the expert, which ``lynn.lm`` may not import)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from lynn.lm.web_dagger import aggregate, rollout_labels, write_records


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m lynn.agents.llm.web_dagger_round --model DIR --out RECORDS.jsonl [--tasks FILE] [--limit N]``: one DAgger
    round's data: the model (``LMPolicy``) rolled out on train instances of ``Lynn/LiveWeb-v0`` (the bundled
    train split, or every instance of a ``--tasks`` file such as a salted draw of
    ``python -m lynn.envs.liveweb.tasks.generate``), each visited state labelled by the expert. Turn the
    records into demos with ``python -m lynn.lm.web_candidates`` beside the earlier rounds' and retrain."""
    import argparse
    import random

    import gymnasium as gym

    import lynn  # noqa: F401  (registers the envs)
    from lynn.agents.llm import LMPolicy
    from lynn.agents.web_expert import WebExpert

    ap = argparse.ArgumentParser(prog="python -m lynn.agents.llm.web_dagger_round", description=main.__doc__)
    ap.add_argument(
        "--model", required=True, help="the learner: a model folder with lynn_web.json, or zoo:NAME"
    )
    ap.add_argument("--out", required=True)
    ap.add_argument("--tasks", help="task file (default: the bundled bank's train split)")
    ap.add_argument("--limit", type=int, help="at most this many instances (a seeded draw)")
    ap.add_argument("--max-steps", type=int, default=12)
    ap.add_argument("--beta", type=float, default=0.0, help="probability of executing the expert's action")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    kw = {"tasks": args.tasks} if args.tasks else {"split": "train"}
    env = gym.make("Lynn/LiveWeb-v0", **kw)
    try:
        tasks = [t for t in env.unwrapped.all_tasks if t.get("split", "train") == "train"]
        ids = [t["task_id"] for t in tasks]
        if args.limit and args.limit < len(ids):
            ids = sorted(random.Random(args.seed).sample(ids, args.limit), key=ids.index)
        learner = LMPolicy(env, model=args.model, threads=args.threads)
        expert = WebExpert(env)
        episodes = [(tid, args.seed + i) for i, tid in enumerate(ids)]
        from tqdm import tqdm

        bar = tqdm(total=len(episodes), desc="dagger rollouts", unit="ep")
        records: list[dict[str, Any]] = []
        wins = 0
        for i, ep in enumerate(episodes):
            rec, summ = rollout_labels(env, learner, expert, [ep], args.max_steps, args.beta, args.seed + i)
            for r in rec:
                r["episode"] = i
            records += rec
            wins += summ["successes"]
            bar.update(1)
            bar.set_postfix(success=f"{wins}/{i + 1}", states=len(records))
        bar.close()
    finally:
        env.close()
    write_records(args.out, aggregate([records]))
    print(
        json.dumps(
            {"episodes": len(episodes), "learner_successes": wins, "states": len(records), "out": args.out}
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
