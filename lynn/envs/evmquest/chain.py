"""Chain backends for Lynn/EVMQuest-v0: an in-process py-evm chain, a local anvil node, or any RPC.

Every backend gives a connected :class:`web3.Web3`, snapshots (``snapshot``/``revert``), funding
of an address, and ``raw_request`` — a JSON-RPC call whose params and result are wire JSON, used
by the sandbox's read-only proxy.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
import weakref
from typing import Any

from web3 import Web3

from lynn.system import find as find_tool

BACKENDS = ("embedded", "anvil", "rpc")


class ChainError(RuntimeError):
    """A backend could not be started or reached."""


def anvil_binary() -> str | None:
    """The anvil binary as :func:`lynn.system.find` finds it (the same lookup ``lynn doctor`` reports)."""
    return find_tool("anvil").path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Chain:
    """Common interface of the backends."""

    name = "chain"
    w3: Web3
    chain_id: int

    def alive(self) -> bool:
        """False once a node this object started has died (the env then restarts it)."""
        return True

    def snapshot(self) -> Any:
        """Take a snapshot of the current state and return its id."""
        return self.w3.manager.request_blocking("evm_snapshot", [])

    def revert(self, snapshot_id: Any) -> Any:
        """Revert to ``snapshot_id``; returns a snapshot id valid for the next revert."""
        ok = self.w3.manager.request_blocking("evm_revert", [snapshot_id])
        if ok is False:
            raise ChainError(f"evm_revert({snapshot_id}) refused by {self.name}")
        # anvil/hardhat consume a snapshot on revert: take it again at the same state.
        return self.snapshot()

    def fund(self, address: str, wei: int) -> None:
        """Give ``address`` a native balance of ``wei``."""
        self.w3.manager.request_blocking("anvil_setBalance", [address, hex(wei)])

    def raw_request(self, method: str, params: list[Any]) -> Any:
        """One JSON-RPC call with wire params; returns the wire result (raises on an RPC error)."""
        response = self.w3.provider.make_request(method, params)  # type: ignore[arg-type]
        if "error" in response:
            error = response["error"]
            message = error.get("message", str(error)) if isinstance(error, dict) else str(error)
            raise ChainError(message)
        return response.get("result")

    def eth_call(self, to: str, data: str) -> bytes:
        """Read-only call at the latest block; returns the raw return data."""
        result = self.raw_request("eth_call", [{"to": to, "data": data}, "latest"])
        return bytes.fromhex(str(result)[2:])

    def close(self) -> None:
        """Release what the backend started (nothing by default)."""


class EmbeddedChain(Chain):
    """eth-tester + py-evm in this process; auto-mine on (one block per transaction)."""

    name = "embedded"

    def __init__(self, chain_id: int) -> None:
        from eth_tester import EthereumTester, PyEVMBackend
        from web3.providers.eth_tester import EthereumTesterProvider
        from web3.providers.eth_tester.defaults import API_ENDPOINTS, static_return

        backend = PyEVMBackend()
        # eth-tester hard-codes its chain id on a class made per backend; set ours so that
        # transactions signed for chain_id (EIP-155) validate and eth_chainId answers it.
        type(backend.chain).chain_id = chain_id
        _step_block_time(type(backend.chain))
        self.tester = EthereumTester(backend)
        endpoints = {ns: dict(methods) for ns, methods in API_ENDPOINTS.items()}
        endpoints["eth"]["chainId"] = static_return(chain_id)
        endpoints["net"]["version"] = static_return(str(chain_id))
        self.w3 = Web3(EthereumTesterProvider(self.tester, api_endpoints=endpoints))
        self.chain_id = chain_id
        self._bank = self.tester.get_accounts()[0]

    def snapshot(self) -> Any:
        # eth-tester reverts by re-importing the snapshot block, re-running its transactions;
        # snapshotting an empty block on top makes every revert ~3.5x cheaper.
        self.tester.mine_blocks(1)
        return self.tester.take_snapshot()

    def revert(self, snapshot_id: Any) -> Any:
        # eth-tester keeps a snapshot after reverting to it.
        self.tester.revert_to_snapshot(snapshot_id)
        return snapshot_id

    def fund(self, address: str, wei: int) -> None:
        current = self.w3.eth.get_balance(address)  # type: ignore[arg-type]
        if wei > current:
            self.tester.send_transaction(
                {"from": self._bank, "to": address, "value": wei - current, "gas": 21000}
            )

    def eth_call(self, to: str, data: str) -> bytes:
        # Straight to eth-tester: web3's middleware stack triples the cost of a read.
        result = self.tester.call({"from": self._bank, "to": to, "data": data}, "latest")
        return bytes.fromhex(result[2:]) if isinstance(result, str) else bytes(result)

    def raw_request(self, method: str, params: list[Any]) -> Any:
        # The tester provider takes python-typed params; the manager's middleware stack converts
        # wire hex params, and Web3.to_json turns HexBytes/AttributeDict results back into JSON.
        result = self.w3.manager.request_blocking(method, params)  # type: ignore[arg-type]
        return json.loads(Web3.to_json(result)) if not isinstance(result, (int, str, type(None))) else result


def _step_block_time(chain_class: type) -> None:
    """Make each block exactly one second after its parent instead of following the wall clock.

    After a revert the head is the snapshot's old block; with wall-clock time the next block would
    jump ahead by however long the env has lived, so a script's ``latest.timestamp + 600``
    deadline could already be past. One second per block keeps chain time consistent (and
    deterministic relative to genesis), like anvil's ``anvil_setBlockTimestampInterval 1``.
    """
    original = chain_class.create_header_from_parent

    def create_header_from_parent(self: Any, parent_header: Any, **header_params: Any) -> Any:
        header_params.setdefault("timestamp", parent_header.timestamp + 1)
        return original(self, parent_header, **header_params)

    chain_class.create_header_from_parent = create_header_from_parent


def _stop_process(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


class AnvilChain(Chain):
    """A local anvil node started (and stopped) by this object, on an ephemeral port.

    Args:
        chain_id: the chain id anvil reports.
        fork_url: fork this JSON-RPC endpoint instead of starting an empty chain.
        binary: path to anvil (default: :func:`anvil_binary`).
    """

    name = "anvil"

    def __init__(self, chain_id: int, fork_url: str | None = None, binary: str | None = None) -> None:
        binary = binary or anvil_binary()
        if binary is None:
            raise ChainError(find_tool("anvil").explain())
        self.port = _free_port()
        args = [binary, "--port", str(self.port), "--host", "127.0.0.1", "--chain-id", str(chain_id)]
        args += ["--accounts", "1", "--balance", "1000000", "--hardfork", "cancun", "--silent"]
        if fork_url:
            args += ["--fork-url", fork_url]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self._finalizer = weakref.finalize(self, _stop_process, self.process)
        self.url = f"http://127.0.0.1:{self.port}"
        self.w3 = Web3(Web3.HTTPProvider(self.url, request_kwargs={"timeout": 30}))
        deadline = time.monotonic() + 20
        while True:
            if self.process.poll() is not None:
                err = self.process.stderr.read().decode(errors="replace") if self.process.stderr else ""
                raise ChainError(f"anvil exited with {self.process.returncode}: {err.strip()[-500:]}")
            try:
                self.chain_id = int(self.w3.eth.chain_id)
                break
            except Exception:
                if time.monotonic() > deadline:
                    self.close()
                    raise ChainError(f"anvil did not answer on {self.url} within 20 s") from None
                time.sleep(0.02)
        # One second per block, from the parent block: chain time stays consistent across reverts.
        self.w3.manager.request_blocking("anvil_setBlockTimestampInterval", [1])

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        self._finalizer()


class RpcChain(Chain):
    """Any JSON-RPC endpoint (snapshots need evm_snapshot/evm_revert, as anvil and hardhat have)."""

    name = "rpc"

    def __init__(self, url: str) -> None:
        self.url = url
        self.w3 = Web3(Web3.HTTPProvider(url, request_kwargs={"timeout": 30}))
        try:
            self.chain_id = int(self.w3.eth.chain_id)
        except Exception as exc:
            raise ChainError(f"cannot reach JSON-RPC endpoint {url}: {exc}") from exc


def make_chain(backend: str, chain_id: int, rpc_url: str | None = None, fork_url: str | None = None) -> Chain:
    """Build the backend called ``backend`` (one of :data:`BACKENDS`)."""
    if backend == "embedded":
        if fork_url or rpc_url:
            raise ValueError(
                "backend='embedded' cannot fork or use rpc_url; pass backend='anvil' with fork_url"
            )
        return EmbeddedChain(chain_id)
    if backend == "anvil":
        return AnvilChain(chain_id, fork_url=fork_url)
    if backend == "rpc":
        if not rpc_url:
            raise ValueError("backend='rpc' needs rpc_url='http://host:port'")
        return RpcChain(rpc_url)
    raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
