"""The :class:`Scenario` base of ``Lynn/Coordination-v0``: the hooks every scenario implements.

Both the simulated scenarios (:mod:`~lynn.envs.coordination.scenarios`) and the real pool
(:mod:`~lynn.envs.coordination.real_pool`) subclass it, and :mod:`~lynn.envs.coordination.scenarios`
names them all, so this module imports neither (no import circle between the catalog and the real pool).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from lynn.envs.coordination.pool import AgentPool, AgentProfile, PoolDynamics, Subtask

__all__ = ["Scenario"]


@dataclass
class Scenario:
    """Base scenario: a fixed pool and an i.i.d. stream of subtasks.

    Attributes:
        type_names: the subtask types.
        p_hard: probability that a subtask is hard.
        type_probs: probability of each type (uniform when ``None``).
        dynamics: load / latency / reputation parameters of the pool.
        target_ratio: an episode is a success when the routed subtasks' success rate reaches this
            fraction of the oracle's expected success rate (the best available worker every step).
    """

    name: ClassVar[str] = "base"
    description: ClassVar[str] = ""
    #: Whether executions are real (the scenario's ``execute``/``expected``) rather than simulated.
    real: ClassVar[bool] = False

    type_names: tuple[str, ...] = ("general",)
    p_hard: float = 0.5
    type_probs: tuple[float, ...] | None = None
    dynamics: PoolDynamics = field(default_factory=PoolDynamics)
    target_ratio: float = 0.9
    agents: tuple[AgentProfile, ...] = ()

    @property
    def n_types(self) -> int:
        return len(self.type_names)

    @property
    def n_slots(self) -> int:
        """Size of the action space (pool slots)."""
        return len(self.profiles())

    def profiles(self) -> list[AgentProfile]:
        """The pool's workers at the start of an episode (the ``agents`` table)."""
        if not self.agents:
            raise ValueError(
                f"scenario {self.name!r} has an empty pool; pass agents=(AgentProfile(...), ...)"
            )
        return list(self.agents)

    def populate(self, pool: AgentPool, rng: np.random.Generator) -> None:
        """Fill ``pool`` at reset."""
        for slot, profile in enumerate(self.profiles()):
            pool.set_agent(slot, profile)

    def sample_subtask(self, t: int, rng: np.random.Generator) -> Subtask:
        """The subtask arriving at step ``t``."""
        probs = None if self.type_probs is None else np.asarray(self.type_probs, dtype=float)
        k = int(rng.choice(self.n_types, p=probs))
        return self._subtask(k, bool(rng.random() < self.p_hard))

    def _subtask(self, k: int, hard: bool) -> Subtask:
        req = np.zeros(self.n_types)
        req[k] = 1.0
        return Subtask(type=k, hard=hard, requirement=req)

    def on_step(self, t: int, pool: AgentPool, rng: np.random.Generator) -> list[str]:
        """Apply the scenario's events before step ``t``; return their descriptions."""
        return []

    @property
    def shock_at(self) -> int | None:
        """The step of the scenario's shock, if it has one."""
        return None
