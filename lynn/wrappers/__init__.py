"""Wrappers that drive Lynn envs at scale: ``echo`` (async vector env, actor-learner, capacity model).

Names are imported lazily so that ``import lynn.wrappers`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["ActorLearner", "EchoRecordEpisodeStatistics", "EchoSB3VecEnv", "EchoVectorEnv"]

_LAZY = {
    "EchoVectorEnv": "lynn.wrappers.echo.vector",
    "EchoRecordEpisodeStatistics": "lynn.wrappers.echo.vector",
    "EchoSB3VecEnv": "lynn.wrappers.echo.sb3",
    "ActorLearner": "lynn.wrappers.echo.actor_learner",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'lynn.wrappers' has no attribute {name!r}")
