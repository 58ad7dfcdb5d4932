"""Run Python agent scripts in a contained worker; the env's process never executes agent code.

Design (one :class:`Sandbox` per env, the fork server shared by a process's sandboxes; the
containment itself is :mod:`~lynn.envs.evmquest.containment`'s, shared with the TypeScript runner):

* A **fork server** (``python -m lynn.envs.evmquest.sandbox FD``) is started once per process
  (all its envs' sandboxes share it; one more only while scripts run concurrently). It imports
  web3 and warms it up, then waits for jobs on a control socket. Forking a warm process keeps
  the cost per script to a few milliseconds instead of a fresh interpreter's second.
* For each script the env makes a fresh socket pair and hands one end to the server
  (``SCM_RIGHTS``). The server forks a **child** that, before touching the script: closes every
  other descriptor, clears the environment, enters a new network namespace (only a down
  loopback) and a mount namespace, mounts a 16 MiB tmpfs on its scratch directory and chroots
  into it (no file of the machine is visible, only already-imported modules can be imported, and
  writes cannot fill the disk), sets rlimits (CPU, 1 GiB address space, file size,
  descriptors), drops to uid/gid 65534, and loads a seccomp filter that refuses ``socket``,
  ``execve``, ``fork``/``vfork``/``clone`` without ``CLONE_THREAD``, ``clone3``, ``ptrace`` and
  namespace/mount calls. Then it ``exec``s the script and calls ``execute_skill``.
* The child reaches the chain only through its socket: newline-delimited JSON-RPC that the env
  answers from a **whitelist of read methods** (:data:`READ_METHODS`) plus
  ``eth_signTypedData_v4`` for the agent's own address, which the env signs (the key never
  leaves the env). Anything else is refused and recorded as a violation.
* The env enforces a wall-clock limit and kills the child when it is exceeded.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
from typing import Any

from lynn.envs.evmquest.containment import (
    MAX_MESSAGE,
    READ_METHODS,
    SandboxLimits,
    ScriptResult,
    ScriptSandbox,
    drop_to_nobody,
    enter_namespaces,
    mount_scratch,
    seccomp_filter,
    send_msg,
    serve_jobs,
    set_rlimits,
)

__all__ = ["READ_METHODS", "Sandbox", "SandboxLimits", "ScriptResult", "serve"]


class Sandbox(ScriptSandbox):
    """Runs Python agent scripts (``execute_skill(w3, agent_address, contracts)``) contained.

    Args:
        limits: per-script limits.
        shared: share the fork server with the process's other Python sandboxes (see
            :class:`~lynn.envs.evmquest.containment.ScriptSandbox`); ``False``: one of its own.
    """

    server_module = "lynn.envs.evmquest.sandbox"
    server_name = "sandbox fork server"

    def __init__(self, limits: SandboxLimits | None = None, shared: bool = True) -> None:
        super().__init__(limits, shared=shared)


# ----------------------------------------------------------------------------- server side
class _ProxyProvider:
    """Newline-delimited JSON-RPC over the inherited socket (the only way out of the child)."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._buf = b""
        self._id = 0

    def make_request(self, method: str, params: Any) -> dict[str, Any]:
        self._id += 1
        self._sock.sendall(
            json.dumps({"id": self._id, "method": method, "params": list(params)}).encode() + b"\n"
        )
        while b"\n" not in self._buf:
            chunk = self._sock.recv(65536)
            if not chunk:
                raise ConnectionError("RPC proxy closed")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)


def _make_provider(sock: socket.socket) -> Any:
    from web3.providers.base import JSONBaseProvider

    class ProxyProvider(JSONBaseProvider):
        def __init__(self) -> None:
            super().__init__()
            self._inner = _ProxyProvider(sock)

        def make_request(self, method: Any, params: Any) -> Any:
            return self._inner.make_request(str(method), params)

        def is_connected(self, show_traceback: bool = False) -> bool:
            return True

    return ProxyProvider()


def _jsonable(value: Any) -> Any:
    """Make what a script returned JSON-friendly (bytes -> 0x hex, Decimal -> str, ...)."""
    from decimal import Decimal

    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return "0x" + bytes(value).hex()
    if isinstance(value, Decimal):
        return str(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"execute_skill returned a {type(value).__name__}, which is not JSON-serialisable")


def _run_child(sock: socket.socket, job: dict[str, Any], scratch: str) -> None:
    """In the forked child: contain, then run the script. Never returns."""
    import io
    import resource
    import traceback

    def report(obj: dict[str, Any]) -> None:
        data = json.dumps({"type": "result", **obj}).encode() + b"\n"
        if len(data) > MAX_MESSAGE:
            data = (
                json.dumps(
                    {"type": "result", "ok": False, "error": f"result is larger than {MAX_MESSAGE} bytes"}
                ).encode()
                + b"\n"
            )
        sock.sendall(data)

    try:
        limits = job["limits"]
        os.setsid()
        keep = sock.fileno()
        devnull = os.open("/dev/null", os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        os.closerange(3, keep)
        os.closerange(keep + 1, 65536)
        os.environ.clear()
        isolation = []
        try:
            enter_namespaces()
            isolation.append("netns")
        except OSError as exc:
            raise RuntimeError(f"sandbox: cannot enter network and mount namespaces ({exc})") from None
        # The scratch dir becomes a small private tmpfs: writes cannot fill the machine's disk.
        try:
            mount_scratch(scratch, limits, mode="0700")
            isolation.append("tmpfs")
        except OSError as exc:
            raise RuntimeError(f"sandbox: cannot mount the scratch tmpfs ({exc})") from None
        # ctypes was needed for unshare/mount only; drop it so the script cannot import it.
        _forget_modules("ctypes", "_ctypes")
        os.chroot(scratch)
        os.chdir("/")
        isolation.append("chroot")
        set_rlimits(limits, memory=(resource.RLIMIT_AS, limits["memory_bytes"]))
        if drop_to_nobody():
            isolation.append("uid65534")
        # Threads count as processes of uid 65534: allow a few; new processes are refused by seccomp.
        resource.setrlimit(resource.RLIMIT_NPROC, (64, 64))
        if _SECCOMP is None:
            raise RuntimeError("seccomp is unavailable (pip install pyseccomp; needs libseccomp2)")
        _SECCOMP.load()
        _forget_modules("pyseccomp")
        isolation.append("seccomp")
    except BaseException as exc:  # containment failed: refuse to run the script
        try:
            report({"ok": False, "error": f"sandbox set-up failed, script not run: {exc}"})
        finally:
            os._exit(3)

    captured = io.StringIO()
    sys.stdout = sys.stderr = captured
    try:
        from web3 import Web3

        w3 = Web3(_make_provider(sock))
        namespace: dict[str, Any] = {"__name__": "agent_script"}
        exec(compile(job["source"], "<agent script>", "exec"), namespace)  # contained: see module docstring
        skill = namespace.get("execute_skill")
        if not callable(skill):
            raise NameError("the script must define execute_skill(w3, agent_address, contracts)")
        value = _jsonable(skill(w3, job["agent_address"], dict(job["contracts"])))
        report({"ok": True, "value": value, "stdout": captured.getvalue()[-4000:]})
        code = 0
    except BaseException as exc:
        tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
        lines = [line for line in tb if "<agent script>" in line or line is tb[-1]]
        try:
            report(
                {"ok": False, "error": "".join(lines)[-3000:].strip(), "stdout": captured.getvalue()[-4000:]}
            )
        except BaseException:
            pass
        code = 1
    os._exit(code)


def _forget_modules(*prefixes: str) -> None:
    """Drop modules from sys.modules; in the chroot they cannot be imported again."""
    for name in [m for m in sys.modules if m in prefixes or m.startswith(tuple(p + "." for p in prefixes))]:
        del sys.modules[name]


def _warm_up() -> None:
    """Import and exercise what scripts use, so the chrooted child never needs the disk."""
    import base64  # noqa: F401
    import collections  # noqa: F401
    import dataclasses  # noqa: F401
    import datetime  # noqa: F401
    import decimal  # noqa: F401
    import fractions  # noqa: F401
    import functools  # noqa: F401
    import hashlib  # noqa: F401
    import itertools  # noqa: F401
    import math  # noqa: F401
    import random  # noqa: F401
    import re  # noqa: F401
    import string  # noqa: F401
    import traceback  # noqa: F401
    import typing  # noqa: F401

    import eth_abi  # noqa: F401
    import eth_utils  # noqa: F401
    from web3 import Web3

    canned = {
        "eth_chainId": "0x38",
        "net_version": "56",
        "eth_blockNumber": "0x10",
        "eth_getBalance": "0xde0b6b3a7640000",
        "eth_getTransactionCount": "0x1",
        "eth_gasPrice": "0x3b9aca00",
        "eth_maxPriorityFeePerGas": "0x3b9aca00",
        "eth_call": "0x" + "00" * 31 + "01",
        "eth_estimateGas": "0x5208",
        "eth_getCode": "0x60",
        "eth_getBlockByNumber": {
            "number": "0x10",
            "hash": "0x" + "11" * 32,
            "parentHash": "0x" + "22" * 32,
            "timestamp": "0x5f5e100",
            "baseFeePerGas": "0x3b9aca00",
            "gasLimit": "0x1c9c380",
            "gasUsed": "0x0",
            "transactions": [],
            "miner": "0x" + "00" * 20,
            "extraData": "0x",
            "logsBloom": "0x" + "00" * 256,
        },
    }

    from web3.providers.base import JSONBaseProvider

    class Canned(JSONBaseProvider):
        def make_request(self, method: Any, params: Any) -> Any:
            return {"jsonrpc": "2.0", "id": 1, "result": canned.get(str(method), "0x0")}

        def is_connected(self, show_traceback: bool = False) -> bool:
            return True

    w3 = Web3(Canned())
    addr = "0x" + "ab" * 20
    checksum = Web3.to_checksum_address(addr)
    w3.eth.chain_id, w3.eth.block_number, w3.eth.get_balance(checksum), w3.eth.gas_price
    w3.eth.get_transaction_count(checksum), w3.eth.get_block("latest"), w3.eth.get_code(checksum)
    _ = w3.eth.max_priority_fee
    Web3.to_wei(1, "ether"), Web3.from_wei(10**18, "ether"), Web3.keccak(text="x"), Web3.to_hex(b"x")
    abi = [
        {
            "type": "function",
            "name": "f",
            "stateMutability": "view",
            "inputs": [{"name": "a", "type": "address"}],
            "outputs": [{"name": "", "type": "uint256"}],
        },
        {
            "type": "function",
            "name": "g",
            "stateMutability": "nonpayable",
            "inputs": [
                {"name": "a", "type": "address[]"},
                {"name": "b", "type": "bytes"},
                {"name": "s", "type": "string"},
            ],
            "outputs": [{"name": "", "type": "bool"}],
        },
        {
            "type": "function",
            "name": "h",
            "stateMutability": "payable",
            "inputs": [],
            "outputs": [{"name": "", "type": "uint256[]"}, {"name": "t", "type": "string"}],
        },
    ]
    c = w3.eth.contract(address=checksum, abi=abi)
    c.functions.f(checksum).call()
    c.encode_abi("g", args=[[checksum], b"\x01", "s"])
    c.functions.g([checksum], b"", "x").build_transaction(
        {"from": checksum, "gas": 100000, "nonce": 0, "maxFeePerGas": 1, "maxPriorityFeePerGas": 1}
    )
    w3.eth.estimate_gas({"from": checksum, "to": checksum, "value": 1})
    w3.eth.call({"to": checksum, "data": "0x"})
    try:
        w3.provider.make_request("eth_signTypedData_v4", [checksum, "{}"])
    except Exception:
        pass
    _jsonable({"a": [b"x", 1, "s", None]})


_SECCOMP: Any = None


def serve(control_fd: int) -> None:
    """Fork-server main loop: one job at a time, one forked child per job."""
    global _SECCOMP
    control = socket.socket(fileno=control_fd)
    _warm_up()
    isolation: dict[str, Any] = {"root": os.geteuid() == 0}
    try:
        _SECCOMP = seccomp_filter()
        isolation["seccomp"] = True
    except Exception as exc:  # reported at start; every child then refuses to run scripts
        isolation["seccomp"] = False
        isolation["seccomp_error"] = str(exc)
    import ctypes  # noqa: F401  (loaded now so the child needs no disk for it)

    send_msg(control, {"ready": True, "isolation": isolation})
    serve_jobs(control, _run_child, prefix="lynn-evmquest-sandbox-")


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    serve(int(sys.argv[1]))
