"""Every Lynn Gym env id, registered with Gymnasium.

`import lynn` runs this module. Entry points are ``"module:Class"`` strings so that nothing heavy
(torch, web3, playwright) is imported until an env is actually made.

Each entry carries a one-line description for ``lynn envs``. What ``make run`` puts on the leaderboard
for each id lives with the job itself (:mod:`lynn.suite.plan`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym


@dataclass(frozen=True)
class EnvEntry:
    """One registered env: the Gymnasium spec arguments and a description."""

    id: str
    entry_point: str
    description: str
    max_episode_steps: int | None = None
    nondeterministic: bool = False
    kwargs: dict[str, Any] = field(default_factory=dict)


ENTRIES: list[EnvEntry] = [
    EnvEntry(
        id="Lynn/Coordination-v0",
        entry_point="lynn.envs.coordination.coordination_env:CoordinationEnv",
        description="route a stream of subtasks to a pool of LLM workers (Symphony-Coord contextual bandit)",
        max_episode_steps=1000,
    ),
    EnvEntry(
        id="Lynn/LiveWeb-v0",
        entry_point="lynn.envs.liveweb.liveweb_env:LiveWebEnv",
        description="web tasks in a real Chromium on bundled shop/forum/admin sites (WebArena-format tasks)",
        max_episode_steps=30,
        nondeterministic=True,
    ),
    EnvEntry(
        id="Lynn/WebWorldModel-v0",
        entry_point="lynn.envs.worldmodel.worldmodel_env:WebWorldModelEnv",
        description="the LiveWeb tasks stepped by a learned web world model (DynaWeb Δ) and a reward model",
        max_episode_steps=30,
        nondeterministic=True,  # info["timings"] are wall-clock; an LM world model may sample
        # model=/reward_model= default to the zoo's (models/webworld, models/web-reward: lynn.zoo).
    ),
    EnvEntry(
        id="Lynn/EVMQuest-v0",
        entry_point="lynn.envs.evmquest.evmquest_env:EVMQuestEnv",
        description="natural-language transaction tasks on a real EVM chain, scripts sandboxed (EVM-QuestBench)",
        max_episode_steps=20,
        # Block timestamps follow the wall clock and info["timings"] varies; seeds fix task and score.
        nondeterministic=True,
    ),
]

ENV_IDS: list[str] = [entry.id for entry in ENTRIES]


def register_envs() -> None:
    """Register every entry with Gymnasium (idempotent: re-importing does not warn)."""
    for entry in ENTRIES:
        if entry.id in gym.registry:
            continue
        gym.register(
            id=entry.id,
            entry_point=entry.entry_point,
            max_episode_steps=entry.max_episode_steps,
            nondeterministic=entry.nondeterministic,
            kwargs=dict(entry.kwargs),
        )


register_envs()
