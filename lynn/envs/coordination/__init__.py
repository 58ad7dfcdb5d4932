"""Symphony-Coord routing: the agent-pool simulation, its scenarios and ``Lynn/Coordination-v0``."""

from __future__ import annotations

from lynn.envs.coordination.coordination_env import CoordinationEnv
from lynn.envs.coordination.scenarios import SCENARIOS, Scenario, make_scenario

__all__ = ["SCENARIOS", "CoordinationEnv", "Scenario", "make_scenario"]
