"""What ``make run`` puts on the leaderboard: per env id, its agents, episode budget and env kwargs.

The zoo's models (:mod:`lynn.zoo`) stand behind agent ``lm`` (role :data:`LM_ROLE`) and behind
``Lynn/WebWorldModel-v0``'s defaults; an env or agent added to the registry joins the job by one line
here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class SuiteEntry:
    """One env on the leaderboard.

    Attributes:
        env_id: the registered id.
        agents: agent names (``lm``: the zoo's LM for the env, role :data:`LM_ROLE`).
        episodes: seeded episodes per agent (the WebWorldModel rows run one episode per instance).
        env_kwargs: ``gym.make`` kwargs (e.g. the held-out split).
    """

    env_id: str
    agents: tuple[str, ...]
    episodes: int = 10
    env_kwargs: dict[str, Any] = field(default_factory=dict)


PLAN: list[SuiteEntry] = [
    SuiteEntry(
        "Lynn/Coordination-v0",
        ("random", "round-robin", "static", "epsilon-greedy", "thompson", "linucb", "oracle"),
        episodes=5,
    ),
    SuiteEntry("Lynn/LiveWeb-v0", ("random", "expert", "lm"), episodes=10, env_kwargs={"split": "test"}),
    # Evaluated on the test instances of this run's LiveWeb expert rows (imagined next to real).
    SuiteEntry("Lynn/WebWorldModel-v0", ("random", "expert"), episodes=10),
    SuiteEntry("Lynn/EVMQuest-v0", ("random", "oracle", "lm"), episodes=12, env_kwargs={"split": "atomic"}),
]

#: The zoo model behind agent ``lm`` on each env (the role ``lm`` of :func:`lynn.zoo.default_for`).
LM_ROLE = "lm"
WORLD_MODEL_ID = "Lynn/WebWorldModel-v0"
LIVEWEB_ID = "Lynn/LiveWeb-v0"
