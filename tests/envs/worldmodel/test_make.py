"""Making ``Lynn/WebWorldModel-v0`` without weights: it trains nothing and says how to get a model."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest

import lynn  # noqa: F401

ENV_ID = "Lynn/WebWorldModel-v0"


def test_make_without_a_model_says_how_to_train_one(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="lynn train world-model"):
        gym.make(ENV_ID)
    with pytest.raises(ValueError, match="lynn train world-model"):
        gym.make(ENV_ID, model=str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="lynn train world-model"):
        gym.make(ENV_ID, model=str(tmp_path))  # a folder with no model in it
