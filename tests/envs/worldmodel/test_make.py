"""Making ``Lynn/WebWorldModel-v0``: with defaults it loads the zoo's world model and reward model (nothing
is trained); a missing model, or an empty zoo, says how to get one."""

from __future__ import annotations

import shutil
from pathlib import Path

import gymnasium as gym
import pytest

import lynn  # noqa: F401
from lynn import zoo

ENV_ID = "Lynn/WebWorldModel-v0"


def test_make_with_defaults_uses_the_zoo_models() -> None:
    env = gym.make(ENV_ID)
    try:
        inner = env.unwrapped
        assert inner.reward_model is not None and inner.starts
        assert {s["split"] for s in inner.starts} == {"test"}  # default split: the held-out instances
        obs, info = env.reset(seed=0)
        assert obs["axtree"] and info["task_id"] in inner.by_id
        obs, reward, terminated, truncated, info = env.step("send_msg_to_user('done')")
        assert terminated and 0.0 <= info["score"] <= 1.0
    finally:
        env.close()
    assert {t["task_id"] for t in type(inner).list_tasks("test")} == set(inner.by_id)


def test_make_without_a_model_says_how_to_train_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="lynn train world-model"):
        gym.make(ENV_ID, model=str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="lynn train world-model"):
        gym.make(ENV_ID, model=str(tmp_path))  # a folder with no model in it
    monkeypatch.setenv("LYNN_ZOO", str(tmp_path))  # a checkout whose zoo is empty
    with pytest.raises(ValueError, match=r"no model for Lynn/WebWorldModel-v0: pass model=PATH"):
        gym.make(ENV_ID)


def test_a_changed_zoo_file_names_itself_and_the_rebuild(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(zoo.zoo_dir() / "webworld", tmp_path / "webworld")
    shutil.copytree(zoo.zoo_dir() / "web-reward", tmp_path / "web-reward")
    monkeypatch.setenv("LYNN_ZOO", str(tmp_path))
    (tmp_path / "webworld" / "worldmodel.json").write_text("{}")
    with pytest.raises(ValueError, match=r"webworld/worldmodel.json changed.*lynn zoo build webworld"):
        gym.make(ENV_ID)
    (tmp_path / "web-reward" / "reward.json").unlink()
    with pytest.raises(ValueError, match=r"web-reward/reward.json is missing.*make models"):
        gym.make(ENV_ID, model=str(zoo.zoo_dir() / "webworld"), reward_model="zoo:web-reward")
