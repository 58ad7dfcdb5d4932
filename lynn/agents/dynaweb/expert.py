"""Real expert trajectories for interleaving, and the batch plan that interleaves them.

The trajectories are the LiveWeb expert's **train-split** demonstrations recorded by ``lynn collect``
(the same ``demos.jsonl`` behaviour cloning read; successful episodes only), grouped back into episodes
by ``(task_id, seed)``. Each step becomes one training row exactly as the policy would see it: the
page cut to the policy's context by :func:`lynn.lm.prompts.fit_web_messages` (the rule BC trained and
``LMPolicy`` acts with), the expert's action as the reply, ended by the EOS token.

How many: a batch holds ``R·G`` on-policy trajectories (``R`` groups of ``G``) and ``n_e`` expert ones
with ``n_e / (n_e + R·G) = expert_ratio`` (rounded), i.e. ``n_e = round(R·G·ρ / (1 − ρ))``; ρ = 0.5
(the paper's "half of a batch") gives as many expert trajectories as imagined ones. Which ones, and
where they sit in the batch, is random: drawn without replacement per update from the update's own
random stream, and the rows of the whole batch are shuffled together before micro-batching.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lynn.agents.dynaweb.rollouts import Step, Trajectory

__all__ = ["ExpertBank", "expert_count", "successful_train_steps"]


def expert_count(imagined: int, ratio: float) -> int:
    """Expert trajectories to add to ``imagined`` on-policy ones so they are ``ratio`` of the batch."""
    if not 0.0 <= ratio < 1.0:
        raise ValueError("expert_ratio must be in [0, 1)")
    return int(round(imagined * ratio / (1.0 - ratio)))


def successful_train_steps(data: str | Path, tasks: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The steps (:func:`lynn.lm.web_candidates.episode_steps` records, in episode order) of the successful
    **train**-split episodes in ``data`` (``lynn collect`` transitions), of ``tasks`` only when given."""
    from lynn.lm.web_candidates import load_steps

    steps = [s for s in load_steps([str(data)]) if s["split"] == "train"]
    won = {(s["task_id"], s["seed"]) for s in steps if s["success"] or (s["reward"] or 0) > 0}
    keep = set(tasks or ())
    return [s for s in steps if (s["task_id"], s["seed"]) in won and (not keep or s["task_id"] in keep)]


def _episodes(demos: Sequence[Any]) -> tuple[list[list[tuple[list[dict[str, str]], str]]], list[str]]:
    """Demos grouped back into episodes by ``(task_id, seed)``, steps in order: each step's
    ``(prompt messages, reply)``, and each episode's task id."""
    by_ep: dict[tuple[str, int], list[Any]] = {}
    for d in demos:
        by_ep.setdefault((d.task_id, d.seed), []).append(d)
    episodes, ids = [], []
    for (tid, _), steps in sorted(by_ep.items()):
        steps.sort(key=lambda d: d.step)
        episodes.append([(d.messages[:-1], d.messages[-1]["content"]) for d in steps])
        ids.append(tid)
    return episodes, ids


@dataclass
class ExpertBank:
    """The expert's train episodes as policy-ready token rows.

    Args:
        episodes: one list of ``(messages, action)`` per episode, steps in order.
        task_ids: the episode's task id.
    """

    episodes: list[list[tuple[list[dict[str, str]], str]]]
    task_ids: list[str]
    ranked: bool = False
    real_steps: int = 0
    _encoded: dict[int, Trajectory] = field(default_factory=dict, repr=False)

    @classmethod
    def load(
        cls, data: str | Path, tasks: Sequence[str] | None = None, policy: str | None = None
    ) -> ExpertBank:
        """Successful train-split LiveWeb expert episodes in ``data`` (a ``lynn collect`` folder/file);
        ``tasks`` restricts them to those task ids. Held-out instances are never read (split filter).

        ``policy``: the policy's model folder. When it holds ``lynn_web.json`` (a ranked-format policy) each
        expert step is rendered as that policy reads a page (:func:`lynn.lm.web_candidates.ranked_demos`, from
        the recorded ``transitions.jsonl``), its reply as the model scores it."""
        if policy is not None and (Path(policy) / "lynn_web.json").exists():
            return cls._load_ranked(data, tasks, Path(policy))
        from lynn.lm.data import read_demos
        from lynn.lm.prompts import LIVEWEB, WORLDMODEL

        demos = [
            d
            for d in read_demos(data, split="train", only_success=True)
            if d.env_id in (LIVEWEB, WORLDMODEL) and (not tasks or d.task_id in set(tasks))
        ]
        episodes, ids = _episodes(demos)
        if not episodes:
            raise ValueError(
                f"no successful train-split expert episodes in {data}; "
                "record some with `lynn collect Lynn/LiveWeb-v0 --split train --out DIR`"
            )
        return cls(episodes, ids, real_steps=sum(len(e) for e in episodes))

    @classmethod
    def _load_ranked(cls, data: str | Path, tasks: Sequence[str] | None, policy: Path) -> ExpertBank:
        import json

        from lynn.lm.web_candidates import WebFormat, ranked_demos

        fmt = WebFormat(**json.loads((policy / "lynn_web.json").read_text()))
        keep = successful_train_steps(data, tasks)
        # a step whose reply no candidate holds has no demo (rare)
        episodes, ids = _episodes(ranked_demos(keep, fmt))
        if not episodes:
            raise ValueError(
                f"no successful train-split expert transitions in {data}; "
                "record some with `lynn collect Lynn/LiveWeb-v0 --split train --out DIR`"
            )
        return cls(episodes, ids, ranked=True, real_steps=len(keep))

    def __len__(self) -> int:
        return len(self.episodes)

    @property
    def steps(self) -> int:
        """Real environment steps these episodes took (they count as real interactions)."""
        return self.real_steps or sum(len(e) for e in self.episodes)

    def encode(self, i: int, tokenizer: Any, context: int, reply_budget: int) -> Trajectory:
        """Episode ``i`` as a :class:`Trajectory` of token rows (cached)."""
        if i in self._encoded:
            return self._encoded[i]
        from lynn.lm.prompts import fit_web_messages
        from lynn.lm.tokenizer import encode_chat, encode_example

        budget = context - reply_budget

        def fits(m: list[dict[str, str]]) -> bool:
            return len(encode_chat(tokenizer, m)) <= budget

        steps = []
        for msgs, action in self.episodes[i]:
            if self.ranked:  # the split the chooser scores its candidates by
                from lynn.lm.web_candidates import reply_token_ids

                steps.append(Step(*reply_token_ids(tokenizer, msgs, action), action))
                continue
            prompt = fit_web_messages(msgs, fits)
            ex = encode_example(tokenizer, [*prompt, {"role": "assistant", "content": action}], 10**9)
            assert ex is not None
            n_prompt = sum(1 for lab in ex["labels"] if lab == -100)
            steps.append(Step(ex["input_ids"][:n_prompt], ex["input_ids"][n_prompt:], action))
        traj = Trajectory(self.task_ids[i], steps, reward=1.0, success=True, source="expert")
        self._encoded[i] = traj
        return traj

    def sample(self, rng: Any, n: int) -> list[int]:
        """``n`` episode indices drawn without replacement (with replacement once the bank is smaller)."""
        if n <= 0:
            return []
        replace = n > len(self.episodes)
        return [int(i) for i in rng.choice(len(self.episodes), size=n, replace=replace)]
