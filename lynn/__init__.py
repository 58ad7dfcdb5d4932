"""Lynn Gym: Gymnasium environments and plug-in agents for LLM-agent research.

``import lynn`` registers every env id (see :mod:`lynn.registry`); nothing heavy is imported here.
The subpackages are attributes that load on first use (PEP 562), so ``import lynn`` then
``lynn.agents.make_agent(...)`` works without paying for agents, eval or the LM stack up front::

    import lynn
    env = gymnasium.make("Lynn/EVMQuest-v0")
    agent = lynn.agents.make_agent("oracle", env)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from lynn.registry import ENV_IDS

if TYPE_CHECKING:  # what the lazy attributes are, for type checkers and IDEs
    from lynn import agents as agents
    from lynn import bench as bench
    from lynn import envs as envs
    from lynn import errors as errors
    from lynn import eval as eval
    from lynn import lm as lm
    from lynn import raytools as raytools
    from lynn import system as system
    from lynn import wrappers as wrappers

__version__ = "0.1.0"
__all__ = ["ENV_IDS", "__version__"]

#: Subpackages and modules reachable as ``lynn.NAME`` without an explicit import.
LAZY_SUBMODULES = frozenset(
    {"agents", "bench", "envs", "errors", "eval", "lm", "raytools", "system", "wrappers"}
)


def __getattr__(name: str) -> Any:
    if name in LAZY_SUBMODULES:
        # import_module binds the submodule on this package, so later lookups skip this hook.
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | LAZY_SUBMODULES)
