"""Session fixtures of the world-model tests (loaded by tests/conftest.py, so the registry-wide tests
can make ``Lynn/WebWorldModel-v0`` with a real model too): real LiveWeb expert transitions recorded once per session with
``lynn collect`` (Chromium on the bundled sites), a page-memory world model and a reward model built
from them, and a tiny LM world model trained in seconds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests._shared import built_once

TEMPLATES = ["shop.product_price", "shop.open_product", "admin.set_price"]
TRAIN_IDS = [f"{t}.{i}" for t in TEMPLATES for i in (0, 1, 2)]
TEST_IDS = [f"{t}.{i}" for t in TEMPLATES for i in (3, 7)]


@pytest.fixture(scope="session")
def web_data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from lynn.eval.collect import CollectConfig, collect

    def build(root: Path) -> None:
        for split, ids in (("train", TRAIN_IDS), ("test", TEST_IDS)):
            collect(
                CollectConfig(
                    "Lynn/LiveWeb-v0", split=split, tasks=ids, out=str(root / split), progress=False
                )
            )

    root = built_once(tmp_path_factory, "web_transitions", build)[0]
    return {"train": root / "train", "test": root / "test"}


@pytest.fixture(scope="session")
def memory_model(web_data: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A page-memory world model plus reward model (no held-out templates: the test split is held out)."""
    from lynn.envs.worldmodel.reward_model import train_reward_model
    from lynn.envs.worldmodel.train import WorldModelConfig, train_world_model

    data = [str(web_data["train"]), str(web_data["test"])]

    def build(out: Path) -> None:
        train_world_model(WorldModelConfig(data=data, out=str(out), kind="memory", heldout=[]))
        train_reward_model(data, str(out), all_templates=True)

    return built_once(tmp_path_factory, "wm_memory", build)[0]


@pytest.fixture(scope="session")
def tiny_world_model(web_data: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built_once(
        tmp_path_factory, "wm_tiny_lm", lambda out: _train_tiny(web_data, out, reply_tokens=128, epochs=1)
    )[0]


def _train_tiny(web_data: dict[str, Path], out: Path, **config: Any) -> Path:
    """A tiny LM world model trained in seconds on the session's episodes (``config`` on top)."""
    from lynn.envs.worldmodel.train import WorldModelConfig, train_world_model

    base = dict(
        kind="lm", size="tiny", context=512, max_minutes=0.3, vocab_size=512, progress=False, threads=1
    )
    train_world_model(
        WorldModelConfig(
            data=[str(web_data["train"]), str(web_data["test"])],
            out=str(out),
            heldout=[],
            **{**base, **config},
        )
    )
    return out


@pytest.fixture(scope="session")
def tiny_correct_model(web_data: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny ``correct``-mode LM world model (it corrects the transferred nearest-neighbour Δ in its
    prompt), trained in seconds on the session's train episodes."""
    return built_once(
        tmp_path_factory,
        "wm_tiny_correct",
        lambda out: _train_tiny(web_data, out, mode="correct", reply_tokens=96, epochs=2),
    )[0]
