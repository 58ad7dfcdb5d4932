"""Held-out evaluation of trained policies: what a trainer runs on its final model, as ``lynn eval`` runs it.

Trainers live with their losses (``lynn.agents``) and may not import ``lynn.eval``; the CLI hands them these
functions (``train_grpo(cfg, evaluate=evmquest_heldout)``), so the evaluation of a trained policy is the
leaderboard's own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def evmquest_heldout(final: str, cfg: Any) -> dict[str, Any]:
    """``lynn train grpo --eval-heldout``: the trained model on EVMQuest's held-out instances (every atomic task,
    seeds from 0), as ``lynn eval --split atomic --agent lm`` runs it; results under ``cfg.out``/eval."""
    from lynn.eval.runner import EvalConfig, evaluate

    return evaluate(
        EvalConfig(
            env_id="Lynn/EVMQuest-v0",
            agent="lm",
            label="lm-grpo",
            split="atomic",
            out=str(Path(cfg.out) / "eval"),
            agent_kwargs={"model": final},
            workers=cfg.eval_workers,
            progress=cfg.progress,
        )
    )
