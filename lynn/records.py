"""The records that cross module boundaries, typed in one place.

Each is a ``TypedDict``: the records are JSON lines on disk and plain dicts in memory (a worker
process, a Ray actor or an Echo pipe sends them as they are), so the type adds checking without
changing a byte of what is written or read.

- :class:`EpisodeRecord` — one finished episode, written by :mod:`lynn.eval.runner` to
  ``episodes.jsonl`` and read by :mod:`lynn.eval.leaderboard` and the suite.
- :class:`RolloutGroup` — the ``G`` completions of one prompt that a GRPO rollout worker
  (:mod:`lynn.agents.llm.rollouts`) sends to the learner (:mod:`lynn.agents.llm.grpo`).
- :class:`Transition` — one LiveWeb step written by ``lynn collect`` (:mod:`lynn.eval.collect`) to
  ``transitions.jsonl``, read by the world model's data loaders (:mod:`lynn.envs.worldmodel.data`).

The fourth, the chat demonstration of ``demos.jsonl``, is the dataclass :class:`lynn.lm.data.Demo`
(it validates itself on construction, so it stays a class beside its reader and writer).

A leaf module (standard library only): every layer may import it.
"""

# No ``from __future__ import annotations`` here: on Python 3.11 a TypedDict whose annotations are strings
# cannot tell ``NotRequired`` keys at run time (``__required_keys__`` would list every key).
from typing import Any, NotRequired, TypedDict

__all__ = ["EpisodeRecord", "RolloutCompletion", "RolloutGroup", "TextObs", "Transition"]


class EpisodeRecord(TypedDict):
    """One episode of ``lynn eval`` (a line of ``episodes.jsonl``).

    An env or agent crash is a record too: ``error`` holds the exception, ``traceback`` its stack.
    """

    env_id: str  #: the bare id (no ``module:`` prefix)
    split: str | None  #: the task split (with a non-default scoring profile: ``"atomic/reference"``)
    task_id: str | None
    episode: int  #: index in the run's plan (the resume key)
    seed: int  #: the env's reset seed
    agent: str
    reward: float  #: summed over the episode
    success: bool
    steps: int
    error: str | None  #: the last step's ``info["error"]``, or the crash
    step_errors: int  #: steps whose ``info`` carried an error
    timings: dict[str, float]  #: seconds: ``reset_s``, ``act_s``, ``step_s``, ``total_s``
    label: NotRequired[str]  #: the row name, when the run has a ``--label``
    score: NotRequired[float]  #: the env's final ``info["score"]``, where it reports one
    regret: NotRequired[float]  #: summed per-step ``info["regret"]`` (Coordination)
    traceback: NotRequired[str]  #: a crash's stack


class RolloutCompletion(TypedDict):
    """One sampled completion of a rollout group and the env's verdict on it."""

    ids: list[int]  #: completion token ids
    reward: float
    success: NotRequired[bool]
    error: NotRequired[str | None]
    finish: NotRequired[str]  #: the generation's finish reason (``stop``, ``length``)


class RolloutGroup(TypedDict):
    """What a GRPO worker returns: ``G`` completions of one prompt, tagged with the policy version.

    :meth:`lynn.agents.llm.grpo.GRPOLearner.validate` refuses a malformed one with a reason.
    """

    version: int  #: the policy version that sampled it (the learner recomputes its log-probs)
    prompt_ids: list[int]
    completions: list[RolloutCompletion]
    task_id: NotRequired[str | None]
    seed: NotRequired[int]
    worker: NotRequired[int]  #: the worker index (per-worker rollout time in the metrics)
    gen_s: NotRequired[float]  #: seconds generating
    env_s: NotRequired[float]  #: seconds stepping the env
    tokens: NotRequired[int]  #: completion tokens in the group


#: The text parts of a LiveWeb observation kept in a transition (``url``, ``title``, ``axtree``,
#: ``open_pages``, ``last_action``, ``last_action_error``; see ``lynn.eval.collect.TEXT_KEYS``).
TextObs = dict[str, Any]


class Transition(TypedDict):
    """One LiveWeb step for world-model training (a line of ``transitions.jsonl``)."""

    env_id: str
    task_id: str
    split: str  #: ``train`` or ``test`` (the task file's split)
    seed: int
    episode: int  #: index in the collection run
    step: int
    goal: str
    obs: TextObs
    action: Any  #: the action as the env took it (a string for LiveWeb)
    next_obs: TextObs
    reward: float
    done: bool
    terminated: bool
    truncated: bool
    error: str | None
