"""DAgger (Ross, Gordon & Bagnell 2011) for the LiveWeb LM policy.

Each round rolls the current learner out on **train** task instances; at every state it visits, the
privileged expert (:class:`lynn.agents.web_expert.WebExpert`, which reads where it is from any state) says
what it would do there. Those (state, expert action) pairs are aggregated with every earlier round's and
the expert's own demonstrations, and the learner is retrained on the union. With ``beta`` > 0 the executed
action is the expert's with that probability (the paper's mixture policy); ``beta=0`` runs the learner alone.

The records have the ``lynn collect`` transition schema, so :func:`lynn.lm.web_candidates.episode_steps`
and :func:`~lynn.lm.web_candidates.ranked_demos` turn them into training chats; the action recorded is the
expert's label, the history the learner's own actions (what the learner will see at act time).
A test-split instance is refused (:func:`aggregate` raises), so no held-out state reaches training.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np


def rollout_labels(
    env: Any,
    learner: Any,
    expert: Any,
    episodes: Sequence[tuple[str, int]],
    max_steps: int = 15,
    beta: float = 0.0,
    seed: int = 0,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Roll ``learner`` out on ``episodes`` (task id, reset seed) of ``env``; label each state with ``expert``.

    Returns the labelled records (one per visited state; ``action`` is the expert's, ``executed`` the one
    taken) and a summary (episodes, the learner's successes, labelled states). Each record's ``history`` is
    the actions executed before it, which is what a learner sees.
    """
    rng = np.random.default_rng(seed)
    records: list[dict[str, Any]] = []
    successes = 0
    for episode, (tid, s) in enumerate(episodes):
        obs, info = env.reset(seed=s, options={"task_id": tid})
        task = env.unwrapped.task
        if task.get("split") == "test":
            raise ValueError(f"{tid} is a test-split task; DAgger rolls out on train instances only")
        learner.reset(seed=s)
        expert.reset(seed=s)
        executed: list[str] = []
        for step in range(max_steps):
            label = expert.act(obs, info)
            mine = learner.act(obs, info)
            act = label if beta > 0 and rng.random() < beta else mine
            # The expert must see the learner's action as a detour (it did not send it).
            expert._sent = label if act == label else None
            records.append(
                {
                    "env_id": "Lynn/LiveWeb-v0",
                    "task_id": tid,
                    "split": task.get("split", "train"),
                    "seed": s,
                    "episode": episode,
                    "step": step,
                    "goal": obs.get("goal", ""),
                    "obs": {
                        k: obs[k]
                        for k in ("url", "title", "axtree", "last_action", "last_action_error")
                        if k in obs
                    },
                    "action": label,
                    "executed": act,
                    "history": list(executed),
                    "source": "dagger",
                }
            )
            obs, _, term, trunc, info = env.step(act)
            executed.append(act)
            if term or trunc:
                break
        successes += bool(info.get("success"))
    return records, {"episodes": len(episodes), "successes": successes, "states": len(records)}


def aggregate(datasets: Iterable[Sequence[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The union of labelled datasets (expert demos first, then each round's), refusing test-split records."""
    out: list[dict[str, Any]] = []
    for i, ds in enumerate(datasets):
        for r in ds:
            if r.get("split") != "train":
                raise ValueError(
                    f"dataset {i}: {r.get('task_id')} seed {r.get('seed')} is a {r.get('split')!r} record; "
                    "DAgger aggregates train-split states only"
                )
            out.append(r)
    return out


def write_records(path: str | Path, records: Iterable[dict[str, Any]]) -> int:
    n = 0
    with Path(path).open("w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
            n += 1
    return n


def read_records(path: str | Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
