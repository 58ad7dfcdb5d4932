"""Batched pre-state reads on anvil: the reset's measured state is the node's, read in one batch."""

from __future__ import annotations

import pytest

from lynn.envs.evmquest.chain import anvil_binary
from lynn.envs.evmquest.evmquest_env import EVMQuestEnv
from lynn.envs.evmquest.logic import LOGIC

pytestmark = pytest.mark.skipif(anvil_binary() is None, reason="anvil not installed (npm ci)")


def test_batched_reads_equal_single_reads_and_a_failing_read_is_none() -> None:
    env = EVMQuestEnv(task="erc20_transfer_fixed", backend="anvil")
    try:
        env.reset(seed=0)
        chain, world = env.chain, env.world
        token = world.addresses["stable"]
        calls = [(token, "0x18160ddd"), (token, "0x70a08231" + "00" * 12 + env.agent_address[2:].lower())]
        calls.append((token, "0xdeadbeef"))  # no such function: the token reverts
        batched = chain.eth_calls(calls)
        assert batched[:2] == [chain.eth_call(*c) for c in calls[:2]]
        assert batched[2] is None
    finally:
        env.close()


def test_reset_measures_the_same_state_with_and_without_the_prefetch() -> None:
    env = EVMQuestEnv(task="erc20_transfer_fixed", backend="anvil")
    try:
        requests: list[bytes] = []
        env.reset(seed=0)
        provider = env.chain.w3.provider
        post = provider._post

        def recording_post(body: bytes) -> bytes:
            requests.append(body)
            return post(body)

        provider._post = recording_post
        for seed in range(1, 7):  # the recipient changes per seed: one read misses and goes to the node
            env.reset(seed=seed)
            with_prefetch = dict(env.before)
            logic = LOGIC[env.instance.spec.task_id]
            assert with_prefetch == env._measure(logic), seed  # read again, one call at a time
        assert any(body.startswith(b"[") for body in requests)  # the reads went out as one batch
        # A step after a prefetched reset is scored against the node's state.
        env.reset(seed=7)
        _, reward, _, _, info = env.step(LOGIC["erc20_transfer_fixed"].script(env.instance.params, env.names))
        assert reward == 1.0 and info["success"], info["error"]
    finally:
        env.close()
