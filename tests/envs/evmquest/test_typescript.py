"""TypeScript/ethers v6 scripts: the Bun runner's containment, the TS oracle, bad scripts."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from lynn.envs.evmquest.sandbox import SandboxLimits

typescript = pytest.importorskip("lynn.envs.evmquest.typescript")
try:
    typescript.bun_path()
except FileNotFoundError as exc:  # `make test` installs it (npm ci); a bare checkout may not have it
    pytest.skip(str(exc), allow_module_level=True)

AGENT = "0x" + "ab" * 20


def _canned(method: str, params: list[Any]) -> Any:
    return {"eth_chainId": 56, "eth_blockNumber": 16, "eth_getBalance": 10**20}.get(method, "0x0")


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Any]:
    sb = typescript.TypeScriptSandbox(SandboxLimits(wall_s=20, cpu_s=2, memory_bytes=256 << 20))
    yield sb
    sb.close()


def run(sb: Any, body: str, header: str = "") -> Any:
    source = (
        'import { ethers } from "ethers";\n'
        f"{header}\n"
        "export async function executeSkill(providerUrl: string, agentAddress: string, "
        "deployedContracts: Record<string, string>): Promise<any> {\n"
        f"{body}\n}}\n"
    )
    return sb.run(source, AGENT, {"USDT": "0x" + "cd" * 20}, _canned)


def test_query_through_the_proxy_is_exact(sandbox: Any) -> None:
    r = run(
        sandbox,
        "const p = new ethers.JsonRpcProvider(providerUrl);\n"
        "const b: bigint = await p.getBalance(agentAddress);\n"
        "console.log('balance', b);\n"
        "return { query_result: b + 1n, who: deployedContracts['USDT'] };",
    )
    assert r.ok, r.error
    assert r.value == {"query_result": 10**20 + 1, "who": "0x" + "cd" * 20}  # a bigint stays exact
    assert r.rpc_calls >= 1 and "balance 100000000000000000000" in r.stdout


def test_unsigned_tx_normalised(sandbox: Any) -> None:
    r = run(
        sandbox,
        "const i = new ethers.Interface(['function transfer(address,uint256)']);\n"
        "return { to: deployedContracts['USDT'], data: i.encodeFunctionData('transfer', [agentAddress, 5n]), "
        "value: 0n, gasLimit: 90000n, nonce: undefined };",
    )
    assert r.ok, r.error
    assert r.value["gas"] == 90000 and "gasLimit" not in r.value and "nonce" not in r.value
    assert r.value["data"].startswith("0xa9059cbb")


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("await fetch('http://example.com/'); return {};", "network access is not available"),
        (
            "const p = new ethers.JsonRpcProvider('http://127.0.0.1:8545/'); await p.send('eth_chainId', []); return {};",
            "network access is not available",
        ),
        (
            "await Bun.connect({ hostname: '127.0.0.1', port: 8545, socket: { data() {} } }); return {};",
            "[ECONNREFUSED connect]",  # socket() is refused by seccomp; Bun reports the failed connect so
        ),
        (
            "const net = await import('node:net'); await new Promise((res, rej) => { "
            "const s = net.connect(80, '10.0.0.1'); s.on('error', rej); s.on('connect', res); }); return {};",
            "[ECONNREFUSED connect]",
        ),
    ],
    ids=["fetch", "ethers-other-url", "bun-connect", "node-net"],
)
def test_no_network(sandbox: Any, body: str, needle: str) -> None:
    r = run(sandbox, body)
    assert not r.ok and needle in r.error, r.error


def test_no_files_of_the_machine(sandbox: Any) -> None:
    r = run(
        sandbox,
        "const fs = await import('node:fs');\n"
        "let passwd = 'readable';\n"
        "try { fs.readFileSync('/etc/passwd', 'utf8'); } catch (e: any) { passwd = e.code; }\n"
        "let repo = 'readable';\n"
        "try { fs.readdirSync('/work'); } catch (e: any) { repo = e.code; }\n"
        "let write = 'ok';\n"
        "try { fs.writeFileSync('/bun', 'x'); } catch (e: any) { write = e.code; }\n"
        "return { query_result: { root: fs.readdirSync('/').sort(), passwd, repo, write, "
        "pids: fs.readdirSync('/proc').filter((x: string) => /^[0-9]+$/.test(x)) } };",
    )
    assert r.ok, r.error
    q = r.value["query_result"]
    # the job file is gone, nothing else is there
    assert q["root"] == ["bun", "harness.js", "harness.js.jsc", "lib", "lib64", "proc"]
    assert q["passwd"] == "ENOENT" and q["repo"] == "ENOENT"
    assert q["write"] in ("EROFS", "EACCES", "EPERM")
    assert q["pids"] == ["1", "2"]  # its own PID namespace: only its init and itself are visible


@pytest.mark.parametrize(
    "body",
    [
        "Bun.spawnSync(['/bun', '--version']); return {};",
        "const cp = await import('node:child_process'); cp.execFileSync('/bun', ['--version']); return {};",
    ],
    ids=["bun-spawn", "child_process"],
)
def test_no_subprocess(sandbox: Any, body: str) -> None:
    r = run(sandbox, body)
    assert not r.ok and ("EPERM" in r.error or "not permitted" in r.error), r.error


def test_cpu_limit(sandbox: Any) -> None:
    r = run(sandbox, "let x = 0; while (true) { x++; }")
    assert not r.ok and "CPU time limit" in r.error, r.error


def test_memory_limit(sandbox: Any) -> None:
    if sandbox.isolation.get("memory") != "cgroup":
        pytest.skip("no writable memory cgroup on this machine (RLIMIT_DATA fallback)")
    r = run(sandbox, "const a: Buffer[] = []; while (true) { a.push(Buffer.alloc(32 << 20, 1)); }")
    assert not r.ok and "memory limit of 256 MiB" in r.error, r.error


def _descendants(pid: int) -> list[int]:
    import os

    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    parents[int(entry)] = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    found, frontier = [], [pid]
    while frontier:
        kids = [c for c, ppid in parents.items() if ppid in frontier]
        found += kids
        frontier = kids
    return found


def test_wall_limit_kills_the_whole_tree() -> None:
    import time

    # A server of its own: the test looks at its process tree and its memory cgroup, gone at close().
    with typescript.TypeScriptSandbox(SandboxLimits(wall_s=3, cpu_s=2), shared=False) as sb:
        r = run(sb, "await new Promise(() => {}); return {};")  # nothing left to wake it: Bun would just exit
        assert not r.ok and "never settled" in r.error, r.error
        r = run(sb, "await new Promise((r) => setTimeout(r, 60_000)); return {};")  # waits without using CPU
        assert not r.ok and "wall-clock limit of 3 s" in r.error, r.error
        deadline = time.monotonic() + 5
        while _descendants(sb.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _descendants(sb.pid) == []  # neither the namespace's init nor Bun outlive the kill
        assert run(sb, "return { query_result: 2 };").value == {"query_result": 2}
        cgroup = f"/sys/fs/cgroup/memory/lynn-evmquest-ts-{sb.pid}"
    import os

    assert not os.path.exists(cgroup)  # the memory cgroup goes with the sandbox


def test_proxy_refuses_writes(sandbox: Any) -> None:
    r = run(
        sandbox,
        "const p = new ethers.JsonRpcProvider(providerUrl);\n"
        "await p.send('eth_sendTransaction', [{ to: agentAddress, value: '0x1' }]); return {};",
    )
    assert not r.ok and r.violations == ["eth_sendTransaction"]


def test_bad_scripts(sandbox: Any) -> None:
    r = sandbox.run("export async function executeSkill( {", AGENT, {}, _canned)
    assert not r.ok and "does not compile" in r.error
    r = sandbox.run("export const x: number = 1;", AGENT, {}, _canned)
    assert not r.ok and "must export executeSkill" in r.error
    r = run(sandbox, "throw new Error('boom');")
    assert not r.ok and "Error: boom" in r.error and "agent-script" in r.error
    assert run(sandbox, "return { query_result: 1 };").value == {"query_result": 1}  # still usable


# ----------------------------------------------------------------------------- with the env
@pytest.fixture(scope="module")
def ts_env() -> Iterator[Any]:
    from lynn.envs.evmquest.evmquest_env import EVMQuestEnv

    env = EVMQuestEnv(split="atomic", script_language="typescript")
    yield env
    env.close()


SAMPLE = [
    "bnb_transfer_percentage",
    "wbnb_deposit",
    "erc20_transfer_fixed",
    "erc20_approve_and_call_1363",
    "query_erc20_balance",
    "query_pair_reserves",
    "query_swap_output_amount",
]


@pytest.mark.parametrize("task_id", SAMPLE)
def test_ts_oracle_solves(ts_env: Any, task_id: str) -> None:
    from lynn.agents.evmquest_oracle import EVMQuestOracle

    obs, info = ts_env.reset(seed=3, options={"task_id": task_id})
    assert "TypeScript" in obs["prompt"] and "executeSkill(providerUrl" in obs["prompt"]
    script = EVMQuestOracle(ts_env).act(obs, info)
    assert "export async function executeSkill" in script
    obs, reward, terminated, _, info = ts_env.step(script)
    assert info["error"] is None and info["success"], info
    assert terminated and reward == pytest.approx(1.0)


def test_env_bad_ts_then_usable(ts_env: Any) -> None:
    from lynn.agents.evmquest_oracle import EVMQuestOracle

    obs, info = ts_env.reset(seed=4, options={"task_id": "query_erc20_balance"})
    good = EVMQuestOracle(ts_env).act(obs, info)
    obs, reward, terminated, _, info = ts_env.step("export async function executeSkill(: {")
    assert "script failed" in info["error"] and "does not compile" in info["error"]
    assert not terminated and reward == 0.0
    obs, reward, terminated, _, info = ts_env.step(good)  # the same episode, next attempt
    assert info["error"] is None and info["success"] and terminated


def test_unknown_language() -> None:
    from lynn.envs.evmquest.evmquest_env import EVMQuestEnv

    with pytest.raises(ValueError, match="script_language"):
        EVMQuestEnv(task="wbnb_deposit", script_language="rust")


def test_python_prompt_unchanged_by_default(evm_env: Any) -> None:
    obs, _ = evm_env.reset(seed=0, options={"task_id": "wbnb_deposit"})
    assert "Python source defining execute_skill" in obs["prompt"] and "TypeScript" not in obs["prompt"]


@pytest.fixture(scope="module")
def ts_composite_env() -> Iterator[Any]:
    from lynn.envs.evmquest.evmquest_env import EVMQuestEnv

    env = EVMQuestEnv(split="composite", script_language="typescript")
    yield env
    env.close()


@pytest.mark.parametrize(
    "task_id",
    ["composite_batch_mixed_transfers", "composite_approve_swap_to_bnb", "composite_wrap_unwrap_cycle"],
)
def test_ts_oracle_solves_composites(ts_composite_env: Any, task_id: str) -> None:
    from lynn.agents.evmquest_oracle import EVMQuestOracle

    oracle = EVMQuestOracle(ts_composite_env)
    obs, info = ts_composite_env.reset(seed=2, options={"task_id": task_id})
    terminated, sent = False, []
    while not terminated:
        action = oracle.act(obs, info)
        sent.append(action)
        obs, reward, terminated, _, info = ts_composite_env.step(action)
        assert info["error"] is None, info
    assert all("export async function executeSkill" in a for a in sent[:-1]) and sent[-1] == '{"done": true}'
    assert info["success"] and reward == pytest.approx(1.0), info


def test_ts_oracle_refuses_an_uncovered_composite(ts_composite_env: Any) -> None:
    from lynn.agents.evmquest_oracle import EVMQuestOracle

    obs, info = ts_composite_env.reset(seed=0, options={"task_id": "composite_full_liquidity_cycle"})
    with pytest.raises(ValueError, match="covers all atomic tasks and 13 composites"):
        EVMQuestOracle(ts_composite_env).act(obs, info)
