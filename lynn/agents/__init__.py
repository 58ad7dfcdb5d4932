"""The agent protocol and the name -> agent lookup used by ``lynn eval --agent NAME``.

An agent is anything with ``name``, ``reset(seed)`` and ``act(obs, info) -> action``; agents that
learn online (bandits) also get every transition through :meth:`Agent.observe`.
"""

from __future__ import annotations

import abc
import importlib
from typing import Any

import gymnasium as gym

__all__ = [
    "AGENTS",
    "ENV_AGENTS",
    "Agent",
    "UnknownAgentError",
    "available_agents",
    "make_agent",
    "resolve_agent",
]


class Agent(abc.ABC):
    """Base class of every Lynn agent.

    Args:
        env: the env the agent will act in (used for its spaces; privileged agents such as an
            oracle may also read the task instance from ``env.unwrapped``).
    """

    name: str = "agent"

    def __init__(self, env: gym.Env | None = None, **kwargs: Any) -> None:
        if kwargs:
            raise TypeError(f"{type(self).__name__} takes no options, got {sorted(kwargs)}")
        self.env = env

    def reset(self, seed: int | None = None) -> None:  # noqa: B027  (optional hook: stateless agents skip it)
        """Start a new episode; all of the agent's randomness must come from ``seed``."""

    @abc.abstractmethod
    def act(self, obs: Any, info: dict[str, Any]) -> Any:
        """Return the action for ``obs``."""

    def observe(  # noqa: B027  (optional hook: only online learners need it)
        self,
        action: Any,
        reward: float,
        next_obs: Any,
        terminated: bool,
        truncated: bool,
        info: dict[str, Any],
    ) -> None:
        """See the outcome of the last action (online learners update here)."""


# Name -> "module:Class". Env-specific names (an env's own oracle) go in ENV_AGENTS and win.
AGENTS: dict[str, str] = {
    "random": "lynn.agents.random_agent:RandomAgent",
    "lm": "lynn.agents.llm:LMPolicy",
    "dynaweb": "lynn.agents.dynaweb.agent:DynaWebAgent",
    "linucb": "lynn.agents.linucb:LinUCBAgent",
    "round-robin": "lynn.agents.bandits:RoundRobinAgent",
    "static": "lynn.agents.bandits:StaticRuleAgent",
    "epsilon-greedy": "lynn.agents.bandits:EpsilonGreedyAgent",
    "thompson": "lynn.agents.bandits:ThompsonAgent",
}
ENV_AGENTS: dict[str, dict[str, str]] = {
    "Lynn/LiveWeb-v0": {
        "expert": "lynn.agents.web_expert:WebExpert",
        "random": "lynn.agents.random_agent:RandomWebAgent",
        "random-text": "lynn.agents.random_agent:RandomAgent",
    },
    # The imagined web has LiveWeb's spaces and task accessor (env.unwrapped.task, .urls): same agents.
    "Lynn/WebWorldModel-v0": {
        "expert": "lynn.agents.web_expert:WebExpert",
        "random": "lynn.agents.random_agent:RandomWebAgent",
        "random-text": "lynn.agents.random_agent:RandomAgent",
    },
    "Lynn/Coordination-v0": {"oracle": "lynn.agents.bandits:OracleRouter"},
    "Lynn/EVMQuest-v0": {"oracle": "lynn.agents.evmquest_oracle:EVMQuestOracle"},
}


class UnknownAgentError(ValueError):
    """Raised for an agent name that is neither registered nor an importable ``module:Class``."""


def available_agents(env_id: str | None = None) -> list[str]:
    """Names ``make_agent`` accepts for ``env_id`` (plus any ``module:Class``)."""
    names = set(AGENTS)
    if env_id is not None:
        names |= set(ENV_AGENTS.get(env_id, {}))
    return sorted(names)


def _load(target: str) -> type:
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise UnknownAgentError(f"agent {target!r}: expected 'module:Class'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UnknownAgentError(f"agent {target!r}: cannot import {module_name!r} ({exc})") from exc
    try:
        return getattr(module, attr)
    except AttributeError as exc:
        raise UnknownAgentError(f"agent {target!r}: {module_name!r} has no {attr!r}") from exc


def resolve_agent(name: str, env_id: str | None = None) -> type:
    """The agent class ``name`` stands for in ``env_id`` (no env needed)."""
    target = ENV_AGENTS.get(env_id or "", {}).get(name) or AGENTS.get(name)
    if target is None:
        if ":" not in name:
            raise UnknownAgentError(
                f"unknown agent {name!r} for {env_id}; choose one of {', '.join(available_agents(env_id))} "
                "or pass 'module:Class'"
            )
        target = name
    return _load(target)


def make_agent(name: str, env: gym.Env, **kwargs: Any) -> Agent:
    """Build the agent called ``name`` for ``env``.

    Args:
        name: a registered name (``random``, ``oracle``, ``linucb``, ...) or ``module:Class``.
        env: the env the agent acts in; its ``spec.id`` selects env-specific agents.
        **kwargs: passed to the agent's constructor.
    """
    cls = resolve_agent(name, env.spec.id if env.spec is not None else None)
    agent = cls(env, **kwargs)
    if not getattr(agent, "name", None) or agent.name == Agent.name:
        agent.name = name
    return agent
