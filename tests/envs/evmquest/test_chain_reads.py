"""The anvil backend's fast reset: pre-state reads in one JSON-RPC batch and a pool of snapshots.

Both must be invisible: the batched reads return what separate ``eth_call``s return, a reset after a
state-changing episode sees the pristine pre-state, and the pool's reverts restore the snapshot.
"""

from __future__ import annotations

import pytest

from lynn.envs.evmquest.catalog import LOGIC
from lynn.envs.evmquest.chain import AnvilChain, ChainError, SnapshotPool, anvil_binary
from lynn.envs.evmquest.evmquest_env import EVMQuestEnv

pytestmark = pytest.mark.skipif(anvil_binary() is None, reason="anvil not installed (npm ci)")


def _record_posts(env: EVMQuestEnv) -> list[bytes]:
    bodies: list[bytes] = []
    provider = env.chain.w3.provider
    post = provider._post

    def recording_post(body: bytes) -> bytes:
        bodies.append(body)
        return post(body)

    provider._post = recording_post
    return bodies


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
        # The same reads through read_batched: one batch, the separate calls' values, the same error.
        bodies = _record_posts(env)
        assert chain.read_batched(lambda: [chain.eth_call(*c) for c in calls[:2]]) == batched[:2]
        assert len(bodies) == 1 and bodies[0].startswith(b"[")
        with pytest.raises(ChainError):
            chain.read_batched(lambda: [chain.eth_call(*c) for c in calls])
    finally:
        env.close()


TASKS = [
    "erc20_transfer_fixed",  # token balances, a per-seed recipient
    "bnb_transfer_basic",  # native balances (eth_getBalance through web3)
    "query_token_metadata",  # string results (zeros are no string: the stand-in pass stops early)
    "swap_exact_bnb_for_tokens",  # a uint[] quote plus balances
]


def test_reset_measures_the_same_state_as_one_read_at_a_time() -> None:
    env = EVMQuestEnv(task=TASKS, backend="anvil")
    try:
        env.reset(seed=0)
        bodies = _record_posts(env)
        for task_id in TASKS:
            logic = LOGIC[task_id]
            for seed in range(1, 5):
                env.reset(seed=seed, options={"task_id": task_id})
                batched = dict(env.before)
                assert batched == env._measure(logic), (task_id, seed)  # read again, one call at a time
            # A step after a batched reset is scored against the node's state.
            env.reset(seed=7, options={"task_id": task_id})
            _, reward, _, _, info = env.step(logic.script(env.instance.params, env.names))
            assert reward == 1.0 and info["success"], (task_id, info["error"])
        assert any(b.startswith(b"[") for b in bodies)  # the reads went out as batches
    finally:
        env.close()


def test_every_pre_state_read_of_a_reset_goes_in_the_one_batch() -> None:
    env = EVMQuestEnv(task="erc20_transfer_fixed", backend="anvil")
    try:
        env.reset(seed=0)
        bodies = _record_posts(env)
        for seed in range(1, 6):  # the recipient changes per seed
            bodies.clear()
            env.reset(seed=seed)
            assert sum(b.startswith(b"[") and b'"eth_call"' in b for b in bodies) == 1, seed
            assert not [b for b in bodies if b.startswith(b"{") and b'"eth_call"' in b], seed
    finally:
        env.close()


def test_a_batched_read_sees_a_changed_state_not_its_last_results() -> None:
    # The first pass answers with the last results; where the node's answer differs, it must not stick.
    chain = AnvilChain(56)
    try:
        who = ["0x00000000000000000000000000000000000000a" + str(i) for i in range(3)]

        def balances() -> list[int]:
            return [int(chain.raw_request("eth_getBalance", [a, "latest"]), 16) for a in who]

        for step in range(4):
            if step == 2:
                chain.fund(who[1], 7)
            assert chain.read_batched(balances) == ([0, 7, 0] if step >= 2 else [0, 0, 0]), step
        chain.fund(who[0], 5)
        assert chain.read_batched(balances) == balances() == [5, 7, 0]
    finally:
        chain.close()


def test_a_batched_read_never_sends_a_call_that_is_not_a_read_twice() -> None:
    env = EVMQuestEnv(task="erc20_transfer_fixed", backend="anvil")
    try:
        env.reset(seed=0)
        chain = env.chain
        block = int(chain.raw_request("eth_blockNumber", []), 16)

        def read_and_mine() -> tuple[int, int]:
            before = int(chain.raw_request("eth_blockNumber", []), 16)
            chain.raw_request("evm_mine", [])
            return before, int(chain.raw_request("eth_blockNumber", []), 16)

        assert chain.read_batched(read_and_mine) == (block, block + 1)
        assert int(chain.raw_request("eth_blockNumber", []), 16) == block + 1
    finally:
        env.close()


def test_a_state_changing_episode_leaves_the_next_reset_pristine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(AnvilChain, "snapshot_pool", 2)  # the pool is taken again every other reset
    env = EVMQuestEnv(task="erc20_transfer_fixed", backend="anvil")
    try:
        _, info = env.reset(seed=3)
        assert isinstance(env._snapshot, SnapshotPool)
        pristine = dict(env.before)
        token = env.world.addresses[env.instance.params["token"]]
        head = int(env.chain.raw_request("eth_blockNumber", []), 16)
        for episode in range(5):
            _, reward, _, _, info = env.step(
                LOGIC["erc20_transfer_fixed"].script(env.instance.params, env.names)
            )
            assert reward == 1.0 and info["success"], (episode, info["error"])
            changed = env._measure(LOGIC["erc20_transfer_fixed"])
            assert changed["agent_token"] < pristine["agent_token"], episode  # the episode moved tokens
            env.reset(seed=3)
            assert env.before == pristine == env._measure(LOGIC["erc20_transfer_fixed"]), episode
            assert int(env.chain.raw_request("eth_blockNumber", []), 16) == head, episode
            assert env.chain.eth_call(token, "0x18160ddd")  # the token is still there
    finally:
        env.close()


def test_snapshot_pool_reverts_past_refills_and_plain_ids_still_work() -> None:
    chain = AnvilChain(56)
    try:
        who = "0x00000000000000000000000000000000000000aa"
        for pool_size in (3, 1):
            chain.snapshot_pool = pool_size
            snap = chain.snapshot()
            assert isinstance(snap, SnapshotPool) == (pool_size > 1)
            head = chain.raw_request("eth_blockNumber", [])
            for i in range(7):
                chain.fund(who, i + 1)
                chain.raw_request("evm_mine", [])
                snap = chain.revert(snap)
                assert chain.raw_request("eth_getBalance", [who, "latest"]) == "0x0", (pool_size, i)
                assert chain.raw_request("eth_blockNumber", []) == head, (pool_size, i)
    finally:
        chain.close()
