"""Rollouts branched from real expert states: a group starts where the expert's train episode of its task was
after ``k`` steps, not at the task's start page.

**Why.** A policy that rarely finishes a task within the horizon gets groups whose rollouts all score 0: their
group-normalised advantages are all 0 and the update learns nothing from them (the LM-alone proof,
BENCHMARKS.md: 20–28 of 30 groups all-equal). Starting part of the groups from later states of a real
successful episode puts the goal within reach, so a group holds both outcomes and its advantages carry
signal, at every stage of the task (``k`` is drawn uniformly from the episode's states after the first). This
is MBPO's branched rollout (model rollouts started from states of real data, Janner et al. 2019) and a
reverse curriculum over expert states (Florensa et al. 2017; Salimans & Chen 2018); the paper's DynaWeb starts
every rollout at the task's start page, which ``branch_ratio = 0`` (the default) keeps.

**What a branch is.** The recorded page at step ``k`` of a successful expert episode of the task (``lynn
collect`` transitions of the **train** split, the same data the interleaving reads), the ``k`` pages and
actions before it, and the actions' reply forms as a ranked-format policy would have written them
(:func:`lynn.lm.web_candidates.episode_steps`: the chooser's prompt lists its earlier replies). In imagination
the world-model env starts from that real page with the prefix as its history (the reward model judges the
whole episode: prefix and rollout); on the real browser the prefix actions are replayed after the reset, and
those steps count as real interactions. Only the policy's own steps after the branch are trained on.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Branch", "ExpertBranches"]


@dataclass(frozen=True)
class Branch:
    """Step ``k`` of a recorded expert episode: the page there, the ``(page, action)`` pairs before it, and the
    actions' reply forms (a ranked policy's history)."""

    task_id: str
    obs: dict[str, Any]
    history: tuple[tuple[dict[str, Any], str], ...]
    replies: tuple[str, ...]

    @property
    def steps(self) -> int:
        """Actions before the branch point."""
        return len(self.history)

    def actions(self) -> list[str]:
        return [a for _, a in self.history]

    def option(self) -> dict[str, Any]:
        """The ``reset`` option of ``Lynn/WebWorldModel-v0`` that starts here."""
        return {"obs": self.obs, "history": [[p, a] for p, a in self.history]}


class ExpertBranches:
    """The successful train-split expert episodes of ``lynn collect`` transitions, by task, as branch points.

    Args:
        episodes: task id -> episodes, each a list of :func:`~lynn.lm.web_candidates.episode_steps` records.
    """

    def __init__(self, episodes: dict[str, list[list[dict[str, Any]]]]) -> None:
        self.episodes = {t: [e for e in eps if len(e) >= 2] for t, eps in episodes.items()}
        self.episodes = {t: eps for t, eps in self.episodes.items() if eps}

    @classmethod
    def load(cls, data: str | Path, tasks: list[str] | None = None) -> ExpertBranches:
        """Branch points of the successful **train** episodes in ``data`` (a ``lynn collect`` folder/file),
        restricted to ``tasks`` when given. Held-out instances are never read (split filter)."""
        from lynn.agents.dynaweb.expert import successful_train_steps

        by_ep: dict[tuple[str, int], list[dict[str, Any]]] = {}
        for s in successful_train_steps(data, tasks):
            by_ep.setdefault((s["task_id"], s["seed"]), []).append(s)
        episodes: dict[str, list[list[dict[str, Any]]]] = {}
        for (tid, _), ep in sorted(by_ep.items()):
            ep.sort(key=lambda s: s["step"])
            episodes.setdefault(tid, []).append(ep)
        out = cls(episodes)
        if not out.episodes:
            raise ValueError(
                f"no successful train-split expert episodes of two or more steps in {data}; "
                "record some with `lynn collect Lynn/LiveWeb-v0 --split train --out DIR`"
            )
        return out

    def __contains__(self, task_id: str) -> bool:
        return task_id in self.episodes

    def __len__(self) -> int:
        return sum(len(e) for e in self.episodes.values())

    def draw(self, rng: Any, task_id: str) -> Branch | None:
        """A branch point of one of ``task_id``'s episodes, ``k`` uniform over its steps after the first (so the
        expert's last action, the answer, is always the policy's to take); None when the task has none."""
        eps = self.episodes.get(task_id)
        if not eps:
            return None
        e = int(rng.integers(len(eps)))
        return self.branch(task_id, int(rng.integers(1, len(eps[e]))), e)

    def branch(self, task_id: str, k: int, episode: int = 0) -> Branch:
        """Step ``k`` (1 ≤ k < the episode's length) of ``task_id``'s ``episode``-th recorded episode."""
        ep = self.episodes[task_id][episode]
        if not 1 <= k < len(ep):
            raise ValueError(f"k must be in [1, {len(ep) - 1}] for this {len(ep)}-step episode, got {k}")
        history = tuple((_page(s["obs"]), str(s["action"])) for s in ep[:k])
        return Branch(task_id, _page(ep[k]["obs"]), history, tuple(ep[k]["replies"]))


def _page(obs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obs.items() if k != "goal"}
