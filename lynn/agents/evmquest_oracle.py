"""The EVMQuest oracle: writes real Python scripts for the current task instance.

A privileged agent: it reads the task through the env's documented accessor
:attr:`lynn.envs.evmquest.evmquest_env.EVMQuestEnv.task_instance`, never the env's internals.
"""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym

from lynn.agents import Agent


class EVMQuestOracle(Agent):
    """Answers each step with the reference script of the env's current task instance.

    Atomic tasks: one script. Composite tasks: one script per step in order, then
    ``{"done": true}``. The oracle follows the env's ``info["outcome"]``: it moves to its next
    script only after a sent transaction succeeded (``"tx_ok"``) or an answer was recorded
    (``"answer"``); after a revert, a script error or a refused answer it sends the same script
    again while the env allows attempts. When the env asks for ``script_language="typescript"`` it writes
    TypeScript/ethers v6 (:func:`lynn.envs.evmquest.ts_oracle.ts_oracle_script`: every atomic task;
    :func:`~lynn.envs.evmquest.ts_oracle.ts_composite_scripts`: the composites in ``TS_COMPOSITES``).

    Args:
        env: a ``Lynn/EVMQuest-v0`` env made with ``action_mode="script"``.
    """

    name = "oracle"

    def __init__(self, env: gym.Env | None = None, **kwargs: Any) -> None:
        super().__init__(env, **kwargs)
        self._cursor = 0  # index of the next script of the current episode

    def _advance(self, obs: Any, info: dict[str, Any]) -> int:
        """The index of the script to send now, from the last step's outcome."""
        step = int(obs["step"])
        if step == 0:
            self._cursor = 0
        elif "outcome" not in info:  # no outcome to follow (e.g. a caller's own info): by step number
            self._cursor = step
        elif info["outcome"] in ("tx_ok", "answer"):
            self._cursor += 1
        return self._cursor

    def act(self, obs: Any, info: dict[str, Any]) -> str:
        from lynn.envs.evmquest.spec import oracle_steps

        if self.env is None:
            raise ValueError("the EVMQuest oracle needs the env it acts in: make_agent('oracle', env)")
        env = self.env.unwrapped
        if getattr(env, "action_mode", None) != "script":
            raise ValueError("the EVMQuest oracle writes scripts: use action_mode='script'")
        instance, names, before = env.task_instance  # type: ignore[attr-defined]
        if getattr(env, "script_language", "python") == "typescript":
            from lynn.envs.evmquest.ts_oracle import TS_COMPOSITES, ts_composite_scripts, ts_oracle_script

            if instance.spec.split == "atomic":
                scripts = [ts_oracle_script(instance.task_id, instance.params, names)]
            elif instance.task_id in TS_COMPOSITES:
                scripts = ts_composite_scripts(instance.task_id, instance.params, names)
            else:
                raise ValueError(
                    f"the TypeScript oracle covers all atomic tasks and {len(TS_COMPOSITES)} composites "
                    f"({', '.join(sorted(TS_COMPOSITES))}), not {instance.task_id!r}"
                )
        else:
            scripts = oracle_steps(instance, names, before)
        index = self._advance(obs, info)
        return scripts[index] if index < len(scripts) else json.dumps({"done": True})
