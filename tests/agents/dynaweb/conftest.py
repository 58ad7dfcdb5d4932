"""DynaWeb fixtures: a tiny BC web policy trained in seconds on the session's real LiveWeb expert
episodes (``web_data``), next to the page-memory world model and reward model built from the same
episodes (``memory_model``; both in tests/_worldmodel_fixtures.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests._shared import built_once
from tests._worldmodel_fixtures import TRAIN_IDS

__all__ = ["TRAIN_IDS"]


@pytest.fixture(scope="session")
def web_policy(web_data: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    from lynn.lm.train import TrainConfig, train_lm

    def build(out: Path) -> None:
        train_lm(
            TrainConfig(
                data=str(web_data["train"]),
                out=str(out),
                size="tiny",
                context=512,
                vocab_size=512,
                epochs=2,
                lr=3e-3,
                progress=False,
                threads=1,
            )
        )

    return built_once(tmp_path_factory, "bc_web_tiny", build)[0]


@pytest.fixture
def run_cfg(web_policy: Path, memory_model: Path, web_data: dict[str, Path], tmp_path: Path) -> Any:
    """A small DynaWeb config on the fixtures (no real-browser validation unless a test asks)."""
    from lynn.agents.dynaweb.config import DynaWebConfig

    def make(**kw: Any) -> DynaWebConfig:
        base: dict[str, Any] = dict(
            policy=str(web_policy),
            out=str(tmp_path / "run"),
            world_model=str(memory_model),
            expert_data=str(web_data["train"]),
            updates=3,
            groups_per_update=1,
            group_size=2,
            horizon=2,
            max_new_tokens=24,
            eval_every=0,
            checkpoint_every=1,
            progress=False,
        )
        return DynaWebConfig(**{**base, **kw})

    return make
