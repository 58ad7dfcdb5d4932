"""Lynn Gym: Gymnasium environments and plug-in agents for LLM-agent research.

``import lynn`` registers every env id (see :mod:`lynn.registry`); nothing heavy is imported here.
"""

from __future__ import annotations

from lynn.registry import ENV_IDS

__version__ = "0.1.0"
__all__ = ["ENV_IDS", "__version__"]
