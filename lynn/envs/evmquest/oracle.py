"""The EVMQuest oracle: writes real Python scripts for the current task instance."""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym

from lynn.agents import Agent


class EVMQuestOracle(Agent):
    """Reads the task instance from the env and answers with the reference scripts.

    Atomic tasks: one script. Composite tasks: one script per step in order, then
    ``{"done": true}``.
    """

    name = "oracle"

    def __init__(self, env: gym.Env | None = None, **kwargs: Any) -> None:
        super().__init__(env, **kwargs)

    def act(self, obs: Any, info: dict[str, Any]) -> str:
        from lynn.envs.evmquest.spec import oracle_steps

        env = self.env.unwrapped  # type: ignore[union-attr]
        if env.action_mode != "script":
            raise ValueError("the EVMQuest oracle writes scripts: use action_mode='script'")
        scripts = oracle_steps(env.instance, env.names, env.before)
        index = int(obs["step"])
        return scripts[index] if index < len(scripts) else json.dumps({"done": True})
