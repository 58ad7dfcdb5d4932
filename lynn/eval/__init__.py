"""Episode runner, results schema and leaderboard."""

from __future__ import annotations

from lynn.eval.runner import EvalConfig, EvalError, evaluate

__all__ = ["EvalConfig", "EvalError", "evaluate"]
