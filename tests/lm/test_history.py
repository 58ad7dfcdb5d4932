"""EVMQuest ``Done:`` history (``lynn train lm --history``): the line a model trains on is the line the policy sends."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import gymnasium as gym
import pytest

import lynn  # noqa: F401  (registers the envs)
from lynn.lm.prompts import evm_action_summary, evm_step_succeeded, render, with_evm_history

TASK = "composite_approve_add_liquidity"


def _same_hashes(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """Transaction hashes differ between two runs of an episode (a swap's deadline is the block's time)."""
    return [{**m, "content": re.sub(r"0x[0-9a-f]{64}", "0xHASH", m["content"])} for m in messages]


def test_summaries_name_the_call_without_its_literals() -> None:
    call = (
        "def execute_skill(w3, agent_address, contracts):\n"
        '    contract = w3.eth.contract(address=contracts[\'USDT\'], abi=abi("LynnToken", "approve"))\n'
        '    return {"to": contract.address, "data": contract.encode_abi("approve", args=[\'0xabc\', 5]), "value": 0}'
    )
    assert evm_action_summary(call) == "USDT.approve"
    send = 'def execute_skill(w3, agent_address, contracts):\n    return {"to": \'0x11\', "value": 3, "data": "0x"}'
    assert evm_action_summary(send) == "send"
    query = (
        'def execute_skill(w3, a, c):\n    return {"query_result": {"native_balance": w3.eth.get_balance(a)}}'
    )
    assert evm_action_summary(query) == "answer:native_balance"
    assert evm_action_summary('{"done": true}') == "done"


def test_only_mined_transactions_and_recorded_answers_count() -> None:
    assert evm_step_succeeded("transaction 0xab status=1 gas_used=46701")
    assert evm_step_succeeded('answer recorded: {"native_balance": 5}')
    assert not evm_step_succeeded("transaction 0xab status=0 gas_used=46701")  # reverted
    assert not evm_step_succeeded("script failed: SyntaxError")
    assert not evm_step_succeeded("")


def test_render_puts_the_line_where_training_inserts_it() -> None:
    obs = {
        "instruction": "Do two things.",
        "agent_address": "0x1",
        "step": 2,
        "last_result": "x",
        "contracts": {"A": 1},
    }
    plain = render("Lynn/EVMQuest-v0", obs)
    assert "Done:" not in plain[1]["content"]  # models trained without history see the old prompt
    assert with_evm_history(plain, ["A.approve", "send"]) == render(
        "Lynn/EVMQuest-v0", obs, history=["A.approve", "send"]
    )
    assert "\nDone: nothing\n" in render("Lynn/EVMQuest-v0", obs, history=[])[1]["content"]
    with pytest.raises(ValueError):
        with_evm_history(with_evm_history(plain, []), [])


def test_training_history_equals_what_the_policy_sends_along_an_episode(
    tiny_lm: Path, tmp_path: Path
) -> None:
    """Oracle demos of a composite task get Done: lines (train side); stepping the same episode, the policy's
    own record renders the same prompts (act side). The task's 2-step plan reads ``USDT.approve`` first."""
    from lynn.agents.evmquest_oracle import EVMQuestOracle
    from lynn.agents.llm import LMPolicy
    from lynn.eval.collect import CollectConfig, collect
    from lynn.lm.data import read_demos
    from lynn.lm.train import _with_history

    cfg = CollectConfig(
        "Lynn/EVMQuest-v0", split="composite", tasks=[TASK], seeds=[100_000], out=str(tmp_path / "d")
    )
    collect(replace(cfg, progress=False))
    demos = _with_history(read_demos(tmp_path / "d"))
    assert [d.step for d in demos] == list(range(len(demos))) and len(demos) >= 3
    assert "\nDone: nothing\n" in demos[0].messages[1]["content"]
    assert "\nDone: USDT.approve\n" in demos[1].messages[1]["content"]

    folder = tmp_path / "hist"
    shutil.copytree(tiny_lm, folder, ignore=shutil.ignore_patterns("checkpoints"))
    summary = json.loads((folder / "lynn_train.json").read_text())
    summary["config"]["history"] = True
    (folder / "lynn_train.json").write_text(json.dumps(summary))
    policy = LMPolicy(env_id="Lynn/EVMQuest-v0", model=str(folder), threads=1)
    assert policy.history is True
    assert LMPolicy(env_id="Lynn/EVMQuest-v0", model=str(tiny_lm), threads=1).history is False

    env = gym.make("Lynn/EVMQuest-v0")
    try:
        oracle = EVMQuestOracle(env)
        obs, info = env.reset(seed=100_000, options={"task_id": TASK})
        for demo in demos:
            sent = policy.messages(obs, policy._history(0, obs))
            assert _same_hashes(sent) == _same_hashes(demo.messages[:-1]), demo.step
            action = oracle.act(obs, info)
            policy.pending[0] = evm_action_summary(action)  # what act_batch records for the reply it returns
            obs, _, term, trunc, info = env.step(action)
            if term or trunc:
                break
    finally:
        env.close()
