"""Chain backends for Lynn/EVMQuest-v0: an in-process py-evm chain, a local anvil node, or any RPC.

Every backend gives a connected :class:`web3.Web3`, snapshots (``snapshot``/``revert``), funding
of an address, and ``raw_request`` — a JSON-RPC call whose params and result are wire JSON, used
by the sandbox's read-only proxy.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import subprocess
import threading
import time
import weakref
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from web3 import Web3
from web3.providers.rpc import HTTPProvider

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
        """Read-only call at the latest block; returns the raw return data (from :meth:`prefetch`'s
        results while a prefetch is open)."""
        if self._reads is not None:
            self._seen.append((to, data))
            cached = self._reads.get((to, data))
            if cached is not None:
                return cached
        result = self.raw_request("eth_call", [{"to": to, "data": data}, "latest"])
        return bytes.fromhex(str(result)[2:])

    _reads: dict[tuple[str, str], bytes] | None = None
    _seen: list[tuple[str, str]] = []

    def eth_calls(self, calls: list[tuple[str, str]]) -> list[bytes | None]:
        """Several read-only calls at the latest block (one JSON-RPC batch where the backend takes
        one); ``None`` for a call that failed (a revert, a missing contract)."""
        out: list[bytes | None] = []
        for to, data in calls:
            try:
                out.append(self.eth_call(to, data))
            except Exception:  # noqa: BLE001  (a reverting read is the caller's to handle, one by one)
                out.append(None)
        return out

    @contextlib.contextmanager
    def prefetch(self, calls: list[tuple[str, str]]) -> Iterator[list[tuple[str, str]]]:
        """Within the block, serve :meth:`eth_call` for ``calls`` from one batched read made on entry;
        yields the list of the ``(to, data)`` calls the block made (to prefetch next time).

        Only for a stretch that sends no transaction (the results are the chain's state on entry); a
        call that is not in ``calls``, or that failed in the batch, goes to the node as usual.
        """
        results = self.eth_calls(calls) if calls else []
        self._reads = {c: r for c, r in zip(calls, results, strict=True) if r is not None}
        self._seen = seen = []
        try:
            yield seen
        finally:
            self._reads, self._seen = None, []

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


class _KeepAliveProvider(HTTPProvider):
    """web3's HTTP provider over one persistent ``http.client`` connection with TCP_NODELAY.

    web3's default sends each request through ``requests`` (≈ 1 ms of client overhead a call on this
    machine, more than anvil takes to answer a read); a reset makes 4–5 calls. The connection is
    reopened once if the node closed it. Batches go over the same connection.
    """

    def __init__(self, url: str, timeout: float = 30.0) -> None:
        super().__init__(url, request_kwargs={"timeout": timeout})
        parts = urlsplit(url)
        self._host, self._port = parts.hostname or "127.0.0.1", parts.port or 80
        self._path = parts.path or "/"
        self._timeout = timeout
        self._conn: http.client.HTTPConnection | None = None
        self._lock = threading.Lock()  # one request at a time on the one connection

    def _connect(self) -> http.client.HTTPConnection:
        conn = http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)
        conn.connect()
        assert conn.sock is not None
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn

    def _post(self, body: bytes) -> bytes:
        with self._lock:
            return self._post_locked(body)

    def _post_locked(self, body: bytes) -> bytes:
        for attempt in (0, 1):
            if self._conn is None:
                self._conn = self._connect()
            try:
                self._conn.request("POST", self._path, body, {"Content-Type": "application/json"})
                response = self._conn.getresponse()
                data = response.read()
                if response.status >= 400 and not data:
                    raise ChainError(f"{self.endpoint_uri} answered HTTP {response.status}")
                return data
            except (http.client.HTTPException, ConnectionError, OSError):
                self._conn.close()
                self._conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def _make_request(self, method: Any, request_data: bytes) -> bytes:
        return self._post(request_data)

    def make_batch_request(self, batch_requests: list[tuple[Any, Any]]) -> Any:
        request_data = self.encode_batch_rpc_request(batch_requests)  # type: ignore[arg-type]
        response = self.decode_rpc_response(self._post(request_data))
        if not isinstance(response, list):
            return response  # one error object for the whole batch
        return sorted(response, key=lambda r: int(r.get("id", 0)))

    def batch(self, calls: list[tuple[str, list[Any]]]) -> list[dict[str, Any]]:
        """Raw JSON-RPC batch: one response dict (``result`` or ``error``) per call, in order."""
        body = json.dumps(
            [{"jsonrpc": "2.0", "id": i, "method": m, "params": p} for i, (m, p) in enumerate(calls)]
        ).encode()
        response = json.loads(self._post(body))
        if not isinstance(response, list):
            raise ChainError(f"batch refused: {response}")
        by_id = {r.get("id"): r for r in response}
        return [by_id.get(i, {"error": "no response"}) for i in range(len(calls))]

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class _HTTPChain(Chain):
    """A chain reached over JSON-RPC HTTP (anvil or any endpoint): reads batch in one request."""

    w3: Web3

    def eth_calls(self, calls: list[tuple[str, str]]) -> list[bytes | None]:
        provider = self.w3.provider
        if not isinstance(provider, _KeepAliveProvider) or len(calls) < 2:
            return super().eth_calls(calls)
        try:
            responses = provider.batch([("eth_call", [{"to": to, "data": d}, "latest"]) for to, d in calls])
        except ChainError:  # an endpoint that takes no batches: one call at a time
            return super().eth_calls(calls)
        return [
            bytes.fromhex(str(r["result"])[2:]) if "result" in r and r["result"] is not None else None
            for r in responses
        ]


class AnvilChain(_HTTPChain):
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
        self.w3 = Web3(_KeepAliveProvider(self.url))
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
        provider = self.w3.provider
        if isinstance(provider, _KeepAliveProvider):
            provider.close()
        self._finalizer()


class RpcChain(_HTTPChain):
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
