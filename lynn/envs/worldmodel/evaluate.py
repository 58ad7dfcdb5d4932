"""Measure world models on held-out transitions (one-step and along whole expert trajectories).

``python -m lynn.envs.worldmodel.evaluate --train DIR --test DIR [--model DIR]`` prints the table of
:mod:`lynn.envs.worldmodel.metrics` figures for *copy*, *nearest neighbour*, the *page memory* and, with
``--model``, the learned world model with and without the page memory, on both held-out sets
(:mod:`lynn.envs.worldmodel.data`).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from typing import Any

from lynn.envs.worldmodel.data import episodes, heldout_sets, read_transitions, training_split
from lynn.envs.worldmodel.delta import apply_delta_text, summarize
from lynn.envs.worldmodel.metrics import mean_scores, score


def one_step(model: Any, rows: Sequence[dict[str, Any]], batch_size: int = 16) -> dict[str, Any]:
    """Mean figures of ``model`` predicting each real next observation from the real current one."""
    per: list[dict[str, float]] = []
    errors = 0
    t0 = time.perf_counter()
    for i in range(0, len(rows), batch_size):
        chunk = rows[i : i + batch_size]
        texts = model.predict([(r.get("goal", ""), r["obs"], r["action"]) for r in chunk])
        # A model that composes its Δ itself (a correct-mode LM) reports its fallbacks in last_errors.
        own = list(getattr(model, "last_errors", None) or [])
        own = own if len(own) == len(chunk) else [None] * len(chunk)
        for r, text, own_err in zip(chunk, texts, own, strict=True):
            pred, err, delta = apply_delta_text(r["obs"], text, r["action"])
            errors += err is not None or own_err is not None
            gold_sum = summarize(r["obs"], r["action"], r["next_obs"])
            per.append(score(pred, r["next_obs"], delta.summary if delta else "", gold_sum))
    out: dict[str, Any] = mean_scores(per)
    out.update(n=len(rows), errors=errors, seconds=time.perf_counter() - t0)
    return out


def rollout_f1(model: Any, rows: Sequence[dict[str, Any]], max_steps: int = 12) -> dict[int, list[float]]:
    """Roll each episode's real actions through ``model`` from its real start page (the model's own
    predictions are fed back); line F1 of the imagined page against the real one, by step."""
    from lynn.envs.worldmodel.metrics import line_f1

    by_step: dict[int, list[float]] = {}
    eps = episodes(rows)
    states = [ep[0]["obs"] for ep in eps]
    for step in range(max_steps):
        live = [i for i, ep in enumerate(eps) if step < len(ep)]
        if not live:
            break
        texts = model.predict(
            [(eps[i][step].get("goal", ""), states[i], eps[i][step]["action"]) for i in live]
        )
        for i, text in zip(live, texts, strict=True):
            r = eps[i][step]
            states[i], _, _ = apply_delta_text(states[i], text, r["action"])
            by_step.setdefault(step + 1, []).append(line_f1(states[i]["axtree"], r["next_obs"]["axtree"]))
    return by_step


def main(argv: list[str] | None = None) -> None:
    from lynn.envs.worldmodel.baselines import CopyModel, MemoryModel, NearestNeighbourModel

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", required=True, help="lynn collect output with the train split")
    ap.add_argument("--test", required=True, help="lynn collect output with the test split")
    ap.add_argument("--model", help="a world model folder from `lynn train world-model`")
    ap.add_argument("--limit", type=int, default=0, help="at most this many transitions per set")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)
    rows = read_transitions(args.train, args.test)
    train = training_split(rows)
    sets = heldout_sets(rows)
    if args.limit:
        sets = {k: v[: args.limit] for k, v in sets.items()}
    models: list[tuple[str, Any]] = [
        ("copy", CopyModel()),
        ("nearest", NearestNeighbourModel(train)),
        # The literal baseline: the neighbour's Δ as retrieved (ids and a kept URL made relative).
        ("nearest (no transfer)", NearestNeighbourModel(train, transfer=False)),
        ("memory", MemoryModel(train)),
    ]
    if args.model:
        from lynn.envs.worldmodel.model import load_world_model

        models.append(("lm", load_world_model(args.model, page_memory=False)))
        models.append(("lm+memory", load_world_model(args.model, page_memory=True)))
    results: dict[str, dict[str, Any]] = {}
    print(f"train transitions (held-out templates removed): {len(train)}")
    print("| model | set | n | line F1 | line F1 (no ids) | exact | URL acc | summary F1 | Δ errors | s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, m in models:
        for set_name, set_rows in sets.items():
            r = one_step(m, set_rows)
            results[f"{name}/{set_name}"] = r
            print(
                f"| {name} | {set_name} | {r['n']} | {r['line_f1']:.3f} | {r['line_f1_noid']:.3f} | {r['exact']:.3f} "
                f"| {r['url_acc']:.3f} | {r['summary_f1']:.3f} | {r['errors']} | {r['seconds']:.1f} |",
                flush=True,
            )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()
