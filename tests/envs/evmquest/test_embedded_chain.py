"""The embedded chain's shortcuts answer exactly what the long way answers.

``EmbeddedChain.fast_reads`` runs a block's reads on one shared state and remembers them per block; with
it off every read goes through ``eth_tester.call`` / web3 as before. Both must give the same values,
the same errors, and no stale answer once the chain has moved on. ``EmbeddedChain.reuse_genesis`` starts
a later env's chain from a copy of the first one's deployed genesis; episodes on it must score as on a
chain that deployed its own.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from lynn.agents.evmquest_oracle import EVMQuestOracle
from lynn.envs.evmquest.catalog import LOGIC
from lynn.envs.evmquest.chain import EmbeddedChain
from lynn.envs.evmquest.evmquest_env import EVMQuestEnv
from lynn.envs.evmquest.world import _GENESIS, PROFILES

TASKS = [
    "erc20_transfer_fixed",
    "bnb_transfer_basic",
    "swap_exact_bnb_for_tokens",
    "query_token_metadata",
    "query_pair_reserves",
    "composite_batch_query_2_balances",
    "composite_query_reserves_before_after_swap",
]


@contextmanager
def slow_reads(env: EVMQuestEnv) -> Iterator[None]:
    env.chain.fast_reads = False
    try:
        yield
    finally:
        del env.chain.fast_reads


def _both(env: EVMQuestEnv, read: Any) -> tuple[str, str]:
    def outcome() -> str:
        try:
            return json.dumps(read(), sort_keys=True, default=str)
        except Exception as exc:  # noqa: BLE001  (the error is what is compared)
            return f"{type(exc).__name__}: {exc}"

    with slow_reads(env):
        slow = outcome()
    return slow, outcome()


@pytest.mark.parametrize("task_id", TASKS)
def test_measures_equal_eth_testers_reads_before_and_after_acting(evm_env: EVMQuestEnv, task_id: str) -> None:
    obs, info = evm_env.reset(seed=3, options={"task_id": task_id})
    logic = LOGIC[task_id]
    slow, fast = _both(evm_env, lambda: evm_env._measure(logic))
    assert fast == slow
    assert json.dumps(evm_env.before, sort_keys=True, default=str) == fast  # reset's own measure
    oracle = EVMQuestOracle(evm_env)
    done = False
    while not done:
        obs, reward, terminated, truncated, info = evm_env.step(oracle.act(obs, info))
        done = terminated or truncated
        # The chain moved: a remembered read of an older block must not answer for the new one.
        slow, fast = _both(evm_env, lambda: evm_env._measure(logic))
        assert fast == slow
    assert info["success"] and reward == pytest.approx(1.0)


def test_raw_reads_and_errors_equal_the_web3_path(evm_env: EVMQuestEnv) -> None:
    evm_env.reset(seed=3, options={"task_id": "erc20_transfer_fixed"})
    chain, token = evm_env.chain, evm_env.world.addresses["stable"]
    agent = evm_env.agent_address
    balance_of = "0x70a08231" + "00" * 12 + agent[2:].lower()
    requests: list[tuple[str, list[Any]]] = [
        ("eth_chainId", []),
        ("eth_call", [{"to": token, "data": "0x18160ddd"}, "latest"]),
        ("eth_call", [{"to": token, "data": balance_of}, "latest"]),
        ("eth_call", [{"to": token, "data": "0xdeadbeef"}, "latest"]),  # reverts
        ("eth_call", [{"to": token.lower(), "data": "0x18160ddd"}, "latest"]),  # not checksummed
        ("eth_call", [{"to": token, "data": "0x18160ddd"}, "earliest"]),  # another block
        ("eth_getBalance", [agent, "latest"]),
        ("eth_getBalance", [agent.lower(), "latest"]),
        ("eth_getBalance", ["0x1234", "latest"]),  # no address
    ]
    for method, params in requests:
        slow, fast = _both(evm_env, lambda m=method, p=params: chain.raw_request(m, p))
        assert fast == slow, (method, params)
    for to, data in [(token, "0x18160ddd"), (token, "0xdeadbeef"), (token, "0x12")]:
        slow, fast = _both(evm_env, lambda t=to, d=data: chain.eth_call(t, d).hex())
        assert fast == slow, (to, data)
    for who in (agent, agent.lower(), "0x1234", 7):
        slow, fast = _both(evm_env, lambda w=who: chain.get_balance(w))
        assert fast == slow, who


def _oracle_episode(env: EVMQuestEnv, task_id: str, seed: int) -> list[str]:
    """What an oracle episode shows: the reset's measure and every step's info (wall-clock timings aside)."""
    obs, info = env.reset(seed=seed, options={"task_id": task_id})
    seen = [json.dumps([obs["instruction"], env.before], sort_keys=True, default=str)]
    oracle = EVMQuestOracle(env)
    done = False
    while not done:
        obs, reward, terminated, truncated, info = env.step(oracle.act(obs, info))
        done = terminated or truncated
        shown = {k: v for k, v in info.items() if k != "timings"}
        seen.append(json.dumps([reward, shown], sort_keys=True, default=str))
    return seen


def test_a_copied_genesis_scores_as_a_deployed_one(monkeypatch: pytest.MonkeyPatch) -> None:
    tasks = [("erc20_transfer_fixed", 1), ("query_pending_rewards", 2), ("composite_wrap_swap_wbnb", 3)]
    copied = EVMQuestEnv(split="all")
    copied.reset(seed=0)  # the process's genesis exists from here on
    assert (copied.profile.name, PROFILES["bsc"].chain_id) in _GENESIS
    again = EVMQuestEnv(split="all")
    monkeypatch.setattr(EmbeddedChain, "reuse_genesis", False)
    deployed = EVMQuestEnv(split="all")
    try:
        deployed.reset(seed=0)
        monkeypatch.undo()
        again.reset(seed=0)
        assert again.world.addresses == deployed.world.addresses == copied.world.addresses
        head = again.chain.tester.backend.chain.header
        own = deployed.chain.tester.backend.chain.header
        assert (head.block_number, head.gas_limit, head.base_fee_per_gas) == (
            own.block_number,
            own.gas_limit,
            own.base_fee_per_gas,
        )
        for task_id, seed in tasks:
            assert _oracle_episode(again, task_id, seed) == _oracle_episode(deployed, task_id, seed), task_id
    finally:
        for env in (copied, again, deployed):
            env.close()


# Runtime code returning PREVRANDAO, and BLOCKHASH(number - 1), behind init code that returns it.
_RUNTIMES = {"prevrandao": "4460005260206000f3", "blockhash": "600143034060005260206000f3"}


def _init_code(runtime: str) -> str:
    n = len(runtime) // 2  # PUSHn runtime, MSTORE at 0, RETURN its last n bytes
    return f"0x{0x5F + n:02x}{runtime}600052" + f"60{n:02x}60{32 - n:02x}f3"


@pytest.mark.parametrize("opcode", sorted(_RUNTIMES))
def test_reads_of_the_random_mix_or_block_hashes_are_not_carried_over(
    evm_env: EVMQuestEnv, opcode: str
) -> None:
    """Two resets that replay the same set-up reach blocks that differ only in the random mix_hash (and
    so in their hashes): a read that sees either must be made again, not remembered from the first."""
    from lynn.envs.evmquest.world import DEPLOYER

    values = []
    for _ in range(2):
        evm_env.reset(seed=4, options={"task_id": "erc20_transfer_fixed"})
        evm_env.world.forget_nonces()
        receipt = evm_env.world.send(DEPLOYER, {"data": _init_code(_RUNTIMES[opcode])}, gas=200_000)
        to = receipt["contractAddress"]
        evm_env.chain.tester.mine_blocks(1)  # the latest block's parent is then this reset's own block
        slow, fast = _both(evm_env, lambda t=to: evm_env.chain.eth_call(t, "0x").hex())
        assert fast == slow
        values.append(fast)
    assert values[0] != values[1]  # the test means something: the two blocks did differ there
