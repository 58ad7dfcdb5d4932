"""Demonstration schema, the held-out split rule, and ``lynn collect`` for EVMQuest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lynn.agents.llm import parse_evm_reply
from lynn.eval.collect import CollectConfig, collect, parse_seeds
from lynn.eval.runner import EvalError
from lynn.lm.data import EVM_TEST_SEEDS, Demo, evm_instance_split, read_demos, write_demos
from lynn.lm.prompts import render


def _demo(split: str = "train", **kw) -> Demo:
    msgs = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    return Demo(msgs, "Lynn/EVMQuest-v0", "t", 100_001, split, **kw)


def test_schema_rejects_malformed_records() -> None:
    with pytest.raises(ValueError, match="end with the assistant"):
        Demo([{"role": "user", "content": "q"}], "E", "t", 0, "train")
    with pytest.raises(ValueError, match="role"):
        Demo([{"role": "bot", "content": "q"}, {"role": "assistant", "content": "a"}], "E", "t", 0, "train")
    with pytest.raises(ValueError, match="split"):
        _demo(split="dev")


def test_training_reader_refuses_held_out_instances(tmp_path: Path) -> None:
    write_demos(tmp_path / "demos.jsonl", [_demo(), _demo("test")])
    with pytest.raises(ValueError, match="held-out"):
        read_demos(tmp_path, split="train")
    assert [d.split for d in read_demos(tmp_path, split="test")] == ["test"]
    assert len(read_demos(tmp_path, split=None)) == 2


def test_reader_names_the_bad_line(tmp_path: Path) -> None:
    (tmp_path / "demos.jsonl").write_text(_demo().to_json() + "\n{not json\n")
    with pytest.raises(ValueError, match=r"demos.jsonl:2"):
        read_demos(tmp_path)


def test_evm_split_is_by_seed() -> None:
    assert evm_instance_split(0) == evm_instance_split(EVM_TEST_SEEDS - 1) == "test"
    assert evm_instance_split(EVM_TEST_SEEDS) == "train"
    assert parse_seeds("3:6") == [3, 4, 5] and parse_seeds("1,9") == [1, 9]
    with pytest.raises(EvalError):
        parse_seeds("a:b")


def test_collect_refuses_held_out_seeds_for_training(tmp_path: Path) -> None:
    with pytest.raises(EvalError, match="test instance"):
        collect(
            CollectConfig(
                "Lynn/EVMQuest-v0", tasks=["wbnb_deposit"], seeds=[5], out=str(tmp_path), progress=False
            )
        )


def test_collected_demos_are_the_rendered_prompt_and_the_oracle_script(evm_demos: Path) -> None:
    import gymnasium as gym

    import lynn  # noqa: F401
    from lynn.agents import make_agent

    demos = read_demos(evm_demos)
    assert len(demos) == 3 * 16 and all(d.split == "train" and d.success for d in demos)
    d = next(x for x in demos if x.task_id == "wbnb_deposit")
    env = gym.make("Lynn/EVMQuest-v0", task="wbnb_deposit")
    try:
        obs, info = env.reset(seed=d.seed)
        script = make_agent("oracle", env).act(obs, info)
        assert d.messages[:-1] == render("Lynn/EVMQuest-v0", obs)
        assert obs["instruction"] in d.messages[1]["content"]
        # A model that reproduces the reply hands the env exactly the oracle's script.
        assert parse_evm_reply(d.messages[-1]["content"]) == script.strip()
        _, reward, *_ = env.step(parse_evm_reply(d.messages[-1]["content"]))
        assert reward == 1.0
    finally:
        env.close()
    # Different seeds give different instances (amounts/recipients change).
    texts = {x.messages[1]["content"] for x in demos if x.task_id == "wbnb_deposit"}
    assert len(texts) == 16
    json.loads(d.to_json())
