"""The EVMQuest oracle: writes a real Python script for the current task instance."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from lynn.agents import Agent


class EVMQuestOracle(Agent):
    """Reads the task instance from the env and answers with the reference script.

    Composite tasks: one script per atomic step in order, then ``{"done": true}``.
    """

    name = "oracle"

    def __init__(self, env: gym.Env | None = None, **kwargs: Any) -> None:
        super().__init__(env, **kwargs)

    def act(self, obs: Any, info: dict[str, Any]) -> str:
        from lynn.envs.evmquest.logic import LOGIC

        env = self.env.unwrapped  # type: ignore[union-attr]
        instance = env.instance
        if env.action_mode != "script":
            raise ValueError("the EVMQuest oracle writes scripts: use action_mode='script'")
        return LOGIC[instance.task_id].script(instance.params, env.names)
