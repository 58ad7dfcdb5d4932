"""``--agent dynaweb``: a DynaWeb-trained policy acting on LiveWeb (or in the world model).

It is :class:`lynn.agents.llm.LMPolicy` (greedy by default) over the run's ``final/`` model, so what
``lynn eval`` measures is exactly the policy the trainer validated. ``model`` may name the run folder
(its ``final/`` is used) or any model folder; ``--agent lm`` loads the same ``final/`` folder too::

    lynn eval Lynn/LiveWeb-v0 --agent dynaweb --agent-arg model='"runs/dynaweb"' --split test
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym

from lynn.agents.llm.policy import LMPolicy

__all__ = ["DynaWebAgent", "resolve_model"]


def resolve_model(model: str | Path) -> str:
    """A DynaWeb run folder -> its ``final/`` model; a model folder as is."""
    p = Path(model)
    if (p / "final" / "config.json").exists():
        return str(p / "final")
    if not (p / "config.json").exists():
        raise ValueError(
            f"{model} is neither a DynaWeb run folder (with final/) nor a model folder; "
            "train one with `lynn train dynaweb --policy BC_DIR --world-model WM_DIR --out RUN`"
        )
    return str(p)


class DynaWebAgent(LMPolicy):
    """An ``LMPolicy`` over a DynaWeb run's policy (see the module docstring).

    Args:
        env: the env (LiveWeb or WebWorldModel).
        model: the run folder or its ``final/`` model folder.
        kwargs: any other :class:`LMPolicy` argument (``temperature``, ``threads``, ...).
    """

    name = "dynaweb"

    def __init__(self, env: gym.Env | None = None, model: str | None = None, **kwargs: Any) -> None:
        if not model:
            raise ValueError(
                "--agent dynaweb needs --agent-arg model='\"RUN_DIR\"' (a `lynn train dynaweb` --out)"
            )
        super().__init__(env, model=resolve_model(model), **kwargs)
