"""Hostile scripts: each scores 0 with a clear error, and the next episode still works; shared fork servers."""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from lynn.envs.evmquest import containment
from lynn.envs.evmquest.catalog import LOGIC
from lynn.envs.evmquest.evmquest_env import EVMQuestEnv
from lynn.envs.evmquest.sandbox import Sandbox, SandboxLimits

TASK = "bnb_transfer_basic"


def skill(body: str, head: str = "") -> str:
    lines = "".join(f"    {line}\n" for line in body.strip().splitlines())
    return f"{head}\ndef execute_skill(w3, agent_address, contracts):\n{lines}"


# name -> (script, what the error must contain: one text or several)
ATTACKS: dict[str, tuple[str, str | tuple[str, ...]]] = {
    "read_etc_passwd": (skill("return {'query_result': open('/etc/passwd').read()}"), "No such file"),
    "read_project_file": (
        skill(f"return {{'query_result': open({os.path.abspath(__file__)!r}).read()}}"),
        "No such file",
    ),
    "list_root": (skill("import os\nreturn {'query_result': os.listdir('/work')}"), "No such file"),
    "open_socket": (
        skill("import socket\ns = socket.socket()\ns.connect(('127.0.0.1', 22))\nreturn {}"),
        "Operation not permitted",
    ),
    "udp_socket": (
        skill("import socket\nsocket.socket(socket.AF_INET, socket.SOCK_DGRAM)\nreturn {}"),
        "Operation not permitted",
    ),
    "subprocess": (
        skill("import subprocess\nreturn {'query_result': subprocess.check_output(['id']).decode()}"),
        "PermissionError: [Errno 1] Operation not permitted",
    ),
    # The script reports what os.system did inside the sandbox: the shell never ran (no /bin/sh in the
    # sandbox's empty root: exit status 127) and no file was made there either.
    "os_system": (
        skill(
            "import os\nrc = os.system('touch lynn_pwned')\n"
            "raise RuntimeError(f'rc={rc} made={os.path.exists(\"lynn_pwned\")}')"
        ),
        ("RuntimeError: rc=32512 made=False",),
    ),
    "fork_bomb": (skill("import os\nwhile True:\n    os.fork()"), "Operation not permitted"),
    "infinite_loop": (skill("while True:\n    pass"), "limit"),
    "sleep_forever": (skill("import time\ntime.sleep(3600)"), "wall-clock limit"),
    "allocate_10gb": (skill("x = bytearray(10 * 2**30)\nreturn {}"), "MemoryError"),
    "env_vars": (skill("import os\nreturn {'query_result': os.environ['LYNN_SECRET']}"), "KeyError"),
    "import_ctypes": (skill("import ctypes\nreturn {}"), "ctypes"),
    "eth_send_transaction": (
        skill(
            "return {'query_result': w3.eth.send_transaction({'from': agent_address, 'to': agent_address, 'value': 1}).hex()}"
        ),
        "eth_sendTransaction",
    ),
    "eth_sign": (
        skill("return {'query_result': w3.provider.make_request('eth_sign', [agent_address, '0x00'])}"),
        "eth_sign",
    ),
    "send_raw_transaction": (
        skill("return {'query_result': w3.provider.make_request('eth_sendRawTransaction', ['0x00'])}"),
        "eth_sendRawTransaction",
    ),
    "anvil_set_balance": (
        skill(
            "return {'query_result': w3.provider.make_request('anvil_setBalance', [agent_address, '0xffff'])}"
        ),
        "anvil_setBalance",
    ),
    "sign_typed_for_other": (
        skill(
            "return {'query_result': w3.provider.make_request('eth_signTypedData_v4', ['0x000000000000000000000000000000000000dEaD', '{}'])}"
        ),
        "own address",
    ),
    "tx_from_other_account": (
        skill(
            "return {'from': '0x000000000000000000000000000000000000dEaD', 'to': agent_address, 'value': 1}"
        ),
        "not the agent",
    ),
    "huge_return": (skill("return {'query_result': 'x' * (8 * 2**20)}"), "larger than"),
    "non_utf8_output": (
        skill(
            "import sys\nsys.stdout.write('\\udcff\\udcfe')\nos_bytes = b'\\xff\\xfe'\nreturn os_bytes",
        ),
        "must return a dict",
    ),
    "fill_scratch_disk": (
        skill("for i in range(64):\n    open(f'f{i}', 'wb').write(b'x' * (2**20 - 1))\nreturn {}"),
        "No space left",
    ),
    "write_outside_scratch": (
        skill(
            "import os\ntry:\n    open('/tmp/lynn_pwned', 'w').write('x')\nexcept OSError as e:\n"
            "    raise RuntimeError(f'{e!r} exists={os.path.exists(\"/tmp/lynn_pwned\")}')\nreturn {}"
        ),
        ("RuntimeError: FileNotFoundError(2, 'No such file or directory') exists=False",),
    ),
    "kill_parent": (
        skill("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nreturn {}"),
        "PermissionError: [Errno 1] Operation not permitted",
    ),
    "syntax_error": ("def execute_skill(:\n", "SyntaxError"),
    "no_function": ("x = 1\n", "execute_skill"),
    "raise_system_exit": (skill("raise SystemExit(0)"), "SystemExit"),
}


@pytest.fixture(scope="module")
def fast_env() -> EVMQuestEnv:
    env = EVMQuestEnv(task=TASK, script_timeout_s=3.0)
    yield env
    env.close()


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_attack_scores_zero_and_env_recovers(
    fast_env: EVMQuestEnv, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LYNN_SECRET", "hunter2")
    source, expected = ATTACKS[name]
    fast_env.reset(seed=0)
    _, total, _, _, info = fast_env.step(source)
    assert total == 0.0
    assert not info.get("success")
    for part in (expected,) if isinstance(expected, str) else expected:
        assert info["error"] and part in info["error"], info["error"]
    assert not os.path.exists("/tmp/lynn_pwned")
    # The next episode works.
    fast_env.reset(seed=1)
    _, reward, _, _, info = fast_env.step(LOGIC[TASK].script(fast_env.instance.params, fast_env.names))
    assert info["success"] and reward == 1.0


def test_secret_env_vars_never_reach_scripts(fast_env: EVMQuestEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LYNN_SECRET", "hunter2")
    # A text question takes any string: "how many variables does the script's environment hold?"
    fast_env.reset(seed=0, options={"task_id": "query_nft_token_uri"})
    _, _, _, _, info = fast_env.step(skill("import os\nreturn {'query_result': str(len(os.environ))}"))
    assert info["error"] is None and fast_env.answers[-1] == "0"


def test_permit_signature_comes_from_the_env(fast_env: EVMQuestEnv) -> None:
    fast_env.reset(seed=0, options={"task_id": "erc20_permit"})
    _, reward, _, _, info = fast_env.step(
        LOGIC["erc20_permit"].script(fast_env.instance.params, fast_env.names)
    )
    assert info["success"], info["checks"]
    assert "eth_signTypedData_v4" not in str(info["error"])


# ----------------------------------------------------------------------------- shared fork servers
ECHO_PID = skill("import os\nreturn {'query_result': os.getpid()}")


def _no_rpc(method: str, params: list) -> None:
    raise PermissionError("no chain here")


def _gone(pid: int, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except OSError:
            return True
        time.sleep(0.05)
    return False


def _child_pid(sb: Sandbox) -> int:
    r = sb.run(ECHO_PID, "0x" + "ab" * 20, {}, _no_rpc)
    assert r.ok, r.error
    return int(r.value["query_result"])


class _OwnKind(Sandbox):
    """Python sandboxes of a kind of their own (an extra server argument, which it ignores): no
    other sandbox of the test process (a module's or the session's env) shares their server."""

    def __init__(self, limits: SandboxLimits | None = None) -> None:
        containment.ScriptSandbox.__init__(self, limits, config=["test-kind"])


def test_sandboxes_of_a_process_share_one_server_and_recover_from_its_death() -> None:
    a, b = _OwnKind(SandboxLimits(wall_s=1.5)), _OwnKind(SandboxLimits(wall_s=2.5))
    try:
        assert a.pid == b.pid  # one server for both...
        first, second = _child_pid(a), _child_pid(b)
        assert first != second and a.pid not in (first, second)  # ...a fresh child per script
        # Each job carries its own limits: b's longer wall-clock limit is b's, not a's.
        assert "limit of 1.5 s" in a.run(skill("import time\ntime.sleep(60)"), "0x", {}, _no_rpc).error
        assert "limit of 2.5 s" in b.run(skill("import time\ntime.sleep(60)"), "0x", {}, _no_rpc).error
        dead = a.pid
        os.kill(dead, signal.SIGKILL)
        assert _gone(dead)
        _child_pid(a), _child_pid(b)  # both go on, on one new server
        assert a.pid == b.pid != dead
        a.close()
        _child_pid(b)  # closing one sandbox leaves the other's server alone
        assert "closed" in a.run(ECHO_PID, "0x", {}, _no_rpc).error
    finally:
        a.close()
        b.close()
    assert _gone(b.pid, within=containment.SHARED_LINGER_S + 5)  # stops once nothing uses it


def test_concurrent_scripts_get_servers_of_their_own() -> None:
    sandboxes = [Sandbox(SandboxLimits(wall_s=10)) for _ in range(2)]
    try:
        slow = skill("import os, time\ntime.sleep(1)\nreturn {'query_result': os.getpid()}")
        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(lambda sb: sb.run(slow, "0x", {}, _no_rpc), sandboxes))
        assert all(r.ok for r in results), [r.error for r in results]
        assert len({r.value["query_result"] for r in results}) == 2
        assert len({sb.pid for sb in sandboxes}) == 2  # no job waited for, or interleaved with, another
        assert {sb.pid for sb in sandboxes} <= set(containment.shared_server_pids())  # idle again, kept
    finally:
        for sb in sandboxes:
            sb.close()


def test_forked_child_starts_its_own_server() -> None:
    sb = Sandbox()
    try:
        parent_server = sb.pid
        read, write = os.pipe()
        child = os.fork()
        if child == 0:  # pragma: no cover (runs in the child)
            code = 1
            try:
                os.close(read)
                os.write(write, f"{_child_pid(sb)} {sb.pid}".encode())
                sb.close()
                code = 0
            finally:
                os._exit(code)
        os.close(write)
        with os.fdopen(read) as fh:
            script, child_server = (int(x) for x in fh.read().split())
        assert os.waitpid(child, 0)[1] == 0 and script > 0
        assert child_server != parent_server  # the child never talks on its parent's channel
        assert sb.pid == parent_server and _child_pid(sb)  # the parent's server is untouched
    finally:
        sb.close()
