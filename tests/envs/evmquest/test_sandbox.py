"""Hostile scripts: each scores 0 with a clear error, and the next episode still works."""

from __future__ import annotations

import os

import pytest

from lynn.envs.evmquest.catalog import LOGIC
from lynn.envs.evmquest.evmquest_env import EVMQuestEnv

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
