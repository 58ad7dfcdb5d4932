"""The env's public behaviour: gym.make, check_env, tx actions, backends, processes, artifacts."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import lynn  # noqa: F401
from lynn.envs.evmquest.catalog import LOGIC
from lynn.envs.evmquest.chain import AnvilChain, RpcChain, anvil_binary
from lynn.envs.evmquest.evmquest_env import EVMQuestEnv
from lynn.envs.evmquest.world import AGENT, FRIEND, PROFILES, deploy_world

REPO = Path(__file__).resolve().parents[3]
HAS_ANVIL = anvil_binary() is not None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


def test_check_env_passes(evm_env: EVMQuestEnv) -> None:
    check_env(evm_env, skip_render_check=True)


def test_gym_make_and_oracle_agent_by_name() -> None:
    from lynn.agents import make_agent

    env = gym.make("Lynn/EVMQuest-v0", task="wbnb_deposit", chain="ethereum")
    try:
        agent = make_agent("oracle", env)
        obs, info = env.reset(seed=5)
        assert "ETH" in obs["instruction"] and obs["chain_id"] == 1
        assert "WETH" in obs["contracts"] and obs["agent_address"] == AGENT.address
        assert "execute_skill" in obs["prompt"] and obs["instruction"] in obs["prompt"]
        _, reward, terminated, _, info = env.step(agent.act(obs, info))
        assert terminated and reward == 1.0 and info["success"] and info["score"] == 100
        assert {c["name"] for c in info["checks"]} >= {"tx_status", "target"}
        assert set(info["timings"]) >= {"script_s", "chain_s", "validate_s"}
    finally:
        env.close()


def test_tx_action_mode_json(evm_env: EVMQuestEnv) -> None:
    env = EVMQuestEnv(task=["erc20_transfer_fixed", "query_erc20_balance"], action_mode="tx")
    try:
        env.reset(seed=2, options={"task_id": "erc20_transfer_fixed"})
        p = env.instance.params
        action = {
            "contract": env.names[p["token"]],
            "function": "transfer",
            "args": [p["recipient"], int(float(p["amount"]) * 100) * 10**16],
        }
        _, reward, terminated, _, info = env.step(json.dumps(action))
        assert terminated and info["success"], info["checks"]
        env.reset(seed=2, options={"task_id": "query_erc20_balance"})
        p = env.instance.params
        # The truth straight from the chain (an eth_call of balanceOf), not from the task's validator.
        token = env.world.addresses[p["token"]]
        data = "0x70a08231" + p["account"].lower().removeprefix("0x").rjust(64, "0")
        truth = int.from_bytes(bytes(env.chain.w3.eth.call({"to": token, "data": data})), "big")
        assert truth > 0
        _, reward, _, _, info = env.step(json.dumps({"query_result": str(truth + 1)}))
        assert reward == 0.0 and info["checks"][0]["passed"] is False  # one base unit off is wrong
        env.reset(seed=2, options={"task_id": "query_erc20_balance"})
        _, reward, _, _, info = env.step(json.dumps({"query_result": str(truth)}))
        assert reward == 1.0
        env.reset(seed=2, options={"task_id": "query_erc20_balance"})
        _, reward, terminated, _, info = env.step("not json")
        assert (reward, terminated) == (0.0, False)
        assert info["error"].startswith("tx action must be a JSON object such as"), info["error"]
    finally:
        env.close()


BAD_ACTIONS = [
    ("", "empty script"),
    ("   ", "empty script"),
    (
        "def execute_skill(w3, a, c):\n    return 5\n",
        "execute_skill must return a dict (transaction or {'query_result': ...}), got int",
    ),
    ('{"done": 1}', "script failed: NameError: the script must define execute_skill"),
    ("\x00\udcff", "script failed: UnicodeEncodeError"),
    (
        'def execute_skill(w3, a, c):\n    return {"to": "0xnope", "value": 1}\n',
        "transaction 'to' must be an address, got '0xnope'",
    ),
    (42, "action must be a string, got int"),
    (None, "action must be a string, got NoneType"),
]


@pytest.mark.parametrize(("action", "error"), BAD_ACTIONS, ids=[repr(a)[:24] for a, _ in BAD_ACTIONS])
def test_bad_actions_never_raise(evm_env: EVMQuestEnv, action: object, error: str) -> None:
    """Each bad action in a fresh episode: reward 0, its own error, and the episode goes on."""
    obs, _ = evm_env.reset(seed=0, options={"task_id": "bnb_transfer_basic"})
    obs, reward, terminated, truncated, info = evm_env.step(action)
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert info["error"].startswith(error), info["error"]
    assert obs["step"] == 1 and obs["last_result"] == info["error"]
    oracle = LOGIC["bnb_transfer_basic"].script(evm_env.instance.params, evm_env.names)
    _, reward, terminated, _, info = evm_env.step(oracle)  # the env is still usable
    assert (reward, terminated, info["error"]) == (1.0, True, None)


def test_random_agent_scores_about_zero(evm_env: EVMQuestEnv) -> None:
    from lynn.agents.random_agent import RandomAgent

    agent = RandomAgent(evm_env)
    total = 0.0
    for seed in range(3):
        obs, info = evm_env.reset(seed=seed)
        agent.reset(seed=seed)
        done = False
        while not done:
            obs, reward, terminated, truncated, info = evm_env.step(agent.act(obs, info))
            total += reward
            done = terminated or truncated
    assert total == 0.0


def test_close_stops_sandbox_server() -> None:
    env = EVMQuestEnv(task="contract_call_simple")
    env.shared_sandbox = False  # a server of its own (a shared one outlives the env: test_sandbox.py)
    env.reset(seed=0)
    env.step(LOGIC["contract_call_simple"].script(env.instance.params, env.names))
    pid = env.sandbox.pid
    assert _alive(pid)
    env.close()
    assert not _alive(pid)


@pytest.mark.skipif(
    not shutil.which("node") or not (REPO / "node_modules" / "solc").exists(), reason="needs node + npm ci"
)
def test_contract_rebuild_is_byte_identical(tmp_path: Path) -> None:
    subprocess.run(
        ["node", str(REPO / "lynn/envs/evmquest/contracts/build.js"), str(tmp_path)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    committed = REPO / "lynn/envs/evmquest/artifacts"
    names = sorted(p.name for p in committed.glob("*.json"))
    assert names == sorted(p.name for p in tmp_path.glob("*.json"))
    for name in names:
        assert (tmp_path / name).read_bytes() == (committed / name).read_bytes(), name


@pytest.mark.slow
@pytest.mark.skipif(not HAS_ANVIL, reason="anvil not installed (npm ci)")
def test_anvil_backend_oracle_and_process_cleanup() -> None:
    env = EVMQuestEnv(backend="anvil", split="atomic")
    try:
        for task_id in [
            "bnb_transfer_basic",
            "erc20_permit",
            "swap_multihop_routing",
            "harvest_rewards",
            "query_current_block_number",
            "erc20_flashloan",
        ]:
            env.reset(seed=4, options={"task_id": task_id})
            _, reward, _, _, info = env.step(LOGIC[task_id].script(env.instance.params, env.names))
            assert info["success"], (task_id, info["error"], info["checks"])
        pid = env.chain.pid
        assert _alive(pid)
    finally:
        env.close()
    assert not _alive(pid)


@pytest.mark.slow
@pytest.mark.skipif(not HAS_ANVIL, reason="anvil not installed (npm ci)")
def test_anvil_killed_mid_episode_is_reported_and_reset_recovers() -> None:
    import signal
    import time

    env = EVMQuestEnv(backend="anvil", split="atomic")
    try:
        env.reset(seed=0, options={"task_id": "bnb_transfer_basic"})
        script = LOGIC["bnb_transfer_basic"].script(env.instance.params, env.names)
        dead = env.chain.pid
        os.kill(dead, signal.SIGKILL)
        while _alive(dead):
            time.sleep(0.01)
        _, reward, terminated, _, info = env.step(script)  # must not raise
        assert reward == 0 and terminated and "anvil node died" in info["error"]
        _, info = env.reset(seed=1, options={"task_id": "bnb_transfer_basic"})
        assert "restarted" in info["error"] and env.chain.pid != dead
        _, reward, _, _, info = env.step(LOGIC["bnb_transfer_basic"].script(env.instance.params, env.names))
        assert reward == 1.0 and info["success"], info["error"]
        pid = env.chain.pid
    finally:
        env.close()
    assert not _alive(pid)


@pytest.mark.slow
@pytest.mark.skipif(not HAS_ANVIL, reason="anvil not installed (npm ci)")
def test_anvil_forks_another_local_anvil_and_rpc_backend() -> None:
    upstream = AnvilChain(56)
    try:
        world = deploy_world(upstream, PROFILES["bsc"])
        usdt = world.addresses["stable"]
        fork = AnvilChain(56, fork_url=upstream.url)
        try:
            token = fork.w3.eth.contract(address=usdt, abi=world.abi("stable"))
            assert token.functions.balanceOf(FRIEND.address).call() == 5_000 * 10**18
            assert token.functions.symbol().call() == "USDT"
        finally:
            fork.close()
        rpc = RpcChain(upstream.url)
        assert rpc.chain_id == 56 and rpc.w3.eth.get_code(usdt)
        snap = rpc.snapshot()
        rpc.fund(AGENT.address, 1)
        snap = rpc.revert(snap)
        assert rpc.w3.eth.get_balance(AGENT.address) > 1
    finally:
        upstream.close()


def test_chain_time_is_consistent_across_resets(evm_env: EVMQuestEnv) -> None:
    # Blocks are one second apart whatever the wall clock does, so `latest.timestamp + 600`
    # deadlines in scripts stay valid however long the env has lived.
    w3 = None
    stamps = []
    for _ in range(2):
        evm_env.reset(seed=0, options={"task_id": "contract_call_simple"})
        w3 = evm_env.chain.w3
        before = w3.eth.get_block("latest")["timestamp"]
        evm_env.step(LOGIC["contract_call_simple"].script(evm_env.instance.params, evm_env.names))
        stamps.append((before, w3.eth.get_block("latest")["timestamp"]))
    assert stamps[0] == stamps[1]
    assert stamps[0][1] == stamps[0][0] + 1
