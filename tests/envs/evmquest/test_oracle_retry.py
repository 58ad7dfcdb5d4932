"""The oracle retries after a failed attempt instead of giving up (Python and TypeScript scripts)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lynn.agents.evmquest_oracle import EVMQuestOracle
from lynn.envs.evmquest.evmquest_env import EVMQuestEnv
from lynn.envs.evmquest.taskkit import selector

HUGE = 2**255  # more than any account holds: the transfer reverts on chain


def reverting_python(token: str, to: str) -> str:
    data = (
        selector("transfer(address,uint256)") + to[2:].lower().rjust(64, "0") + hex(HUGE)[2:].rjust(64, "0")
    )
    return (
        "def execute_skill(w3, agent_address, contracts):\n"
        f'    return {{"to": {token!r}, "data": {data!r}, "value": 0, "gas": 200000}}\n'
    )


def reverting_typescript(token: str, to: str) -> str:
    return (
        'import { ethers } from "ethers";\n'
        "export async function executeSkill(providerUrl: string, agentAddress: string, "
        "deployedContracts: Record<string, string>): Promise<any> {\n"
        '  const iface = new ethers.Interface(["function transfer(address,uint256)"]);\n'
        f'  return {{ to: "{token}", data: iface.encodeFunctionData("transfer", ["{to}", 2n ** 255n]), '
        "value: 0n, gasLimit: 200000n };\n}\n"
    )


def play_after_failure(
    env: EVMQuestEnv, task_id: str, seed: int, bad: str
) -> tuple[dict[str, Any], list[str]]:
    """Reset; the oracle's first attempt is replaced by ``bad``; then the oracle plays on.

    The last info and the outcomes seen.
    """
    oracle = EVMQuestOracle(env)
    obs, info = env.reset(seed=seed, options={"task_id": task_id})
    oracle.act(obs, info)  # its first script, lost: the attempt sent is ``bad``
    obs, _, terminated, _, info = env.step(bad)
    outcomes = [info["outcome"]]
    assert not terminated, info
    while not terminated:
        action = oracle.act(obs, info)
        assert action != json.dumps({"done": True}) or env.instance.spec.split == "composite", outcomes
        obs, _, terminated, _, info = env.step(action)
        outcomes.append(info["outcome"])
    return info, outcomes


def _token_and_recipient(env: EVMQuestEnv) -> tuple[str, str]:
    return env.world.addresses["stable"], env.agent_address


@pytest.mark.parametrize("task_id", ["erc20_transfer_fixed", "bnb_transfer_basic", "query_erc20_balance"])
def test_python_oracle_retries_after_a_revert(evm_env: EVMQuestEnv, task_id: str) -> None:
    evm_env.reset(seed=7, options={"task_id": task_id})
    bad = reverting_python(*_token_and_recipient(evm_env))
    info, outcomes = play_after_failure(evm_env, task_id, 7, bad)
    assert outcomes[0] in ("tx_reverted", "tx_error") and len(outcomes) == 2, outcomes
    assert info["success"] and info["score"] == 100, info


def test_python_oracle_resumes_a_composite_after_a_failed_step(evm_env: EVMQuestEnv) -> None:
    task_id = "composite_wrap_unwrap_cycle"
    oracle = EVMQuestOracle(evm_env)
    obs, info = evm_env.reset(seed=3, options={"task_id": task_id})
    obs, _, _, _, info = evm_env.step(oracle.act(obs, info))  # first step of the oracle's plan
    assert info["outcome"] == "tx_ok", info
    oracle.act(obs, info)  # its second script, lost: the attempt sent reverts
    obs, _, _, _, info = evm_env.step(reverting_python(*_token_and_recipient(evm_env)))
    assert info["outcome"] in ("tx_reverted", "tx_error"), info
    terminated = False
    while not terminated:
        obs, _, terminated, _, info = evm_env.step(oracle.act(obs, info))
    assert info["success"] and info["outcome"] == "done", info


def test_step_number_fallback_without_an_outcome(evm_env: EVMQuestEnv) -> None:
    obs, info = evm_env.reset(seed=1, options={"task_id": "wbnb_deposit"})
    oracle = EVMQuestOracle(evm_env)
    assert "execute_skill" in oracle.act(obs, info)
    obs = {**obs, "step": 1}
    assert oracle.act(obs, {}) == json.dumps({"done": True})  # no outcome given: script index = step


def test_typescript_oracle_retries_after_a_revert() -> None:
    typescript = pytest.importorskip("lynn.envs.evmquest.typescript")
    try:
        typescript.bun_path()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    env = EVMQuestEnv(task="erc20_transfer_fixed", script_language="typescript")
    try:
        env.reset(seed=5)
        bad = reverting_typescript(*_token_and_recipient(env))
        info, outcomes = play_after_failure(env, "erc20_transfer_fixed", 5, bad)
        assert outcomes[0] in ("tx_reverted", "tx_error") and len(outcomes) == 2, outcomes
        assert info["success"] and info["score"] == 100, info
    finally:
        env.close()
