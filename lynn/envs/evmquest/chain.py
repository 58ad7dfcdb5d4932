"""Chain backends for Lynn/EVMQuest-v0: an in-process py-evm chain, a local anvil node, or any RPC.

Every backend gives a connected :class:`web3.Web3`, snapshots (``snapshot``/``revert``), funding
of an address, and ``raw_request`` — a JSON-RPC call whose params and result are wire JSON, used
by the sandbox's read-only proxy.
"""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

from web3 import Web3
from web3.providers.rpc import HTTPProvider

from lynn.system import find as find_tool

BACKENDS = ("embedded", "anvil", "rpc")

_T = TypeVar("_T")

# Read-only JSON-RPC methods a batched read serves from its one batch, with the stand-in result each
# gets while the read's calls are being recorded (when no earlier real result of the same call is known).
_READ_PLACEHOLDERS: dict[str, str] = {
    "eth_call": "0x" + "00" * 256,
    "eth_getBalance": "0x0",
    "eth_blockNumber": "0x0",
    "eth_getTransactionCount": "0x0",
    "eth_gasPrice": "0x0",
    "eth_getCode": "0x",
    "eth_getStorageAt": "0x" + "00" * 32,
}


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

    def get_balance(self, address: str) -> int:
        """Native balance of ``address`` at the latest block (``w3.eth.get_balance``)."""
        return int(self.w3.eth.get_balance(address))  # type: ignore[arg-type]

    def read_batched(self, read: Callable[[], _T]) -> _T:
        """Run ``read``, a function that only reads the chain; a backend over HTTP makes its reads in
        one JSON-RPC batch (see :meth:`_KeepAliveProvider.batched`). Here: just ``read()``."""
        return read()

    def close(self) -> None:
        """Release what the backend started (nothing by default)."""


class EmbeddedChain(Chain):
    """eth-tester + py-evm in this process; auto-mine on (one block per transaction)."""

    name = "embedded"
    #: Reads on one state per block, remembered per block (False: eth-tester's fresh state per read).
    fast_reads = True
    #: The env's genesis is deployed once per process and copied (False: every chain deploys its own).
    reuse_genesis = True

    def __init__(self, chain_id: int) -> None:
        from eth_tester import EthereumTester, PyEVMBackend
        from web3.providers.eth_tester import EthereumTesterProvider
        from web3.providers.eth_tester.defaults import API_ENDPOINTS, static_return

        backend = PyEVMBackend()
        # eth-tester hard-codes its chain id on a class made per backend; set ours so that
        # transactions signed for chain_id (EIP-155) validate and eth_chainId answers it.
        type(backend.chain).chain_id = chain_id
        _step_block_time(type(backend.chain))
        # py-evm's default estimator runs each transaction ~13 times; ours returns the same gas (or raises
        # the same error) with fewer runs. On the object and on its class (eth-tester rebuilds the object
        # on a revert to genesis).
        from lynn.envs.evmquest.gas_search import replayed_gas_search

        type(backend.chain).gas_estimator = staticmethod(replayed_gas_search)
        backend.chain.gas_estimator = replayed_gas_search
        self.tester = EthereumTester(backend)
        endpoints = {ns: dict(methods) for ns, methods in API_ENDPOINTS.items()}
        endpoints["eth"]["chainId"] = static_return(chain_id)
        endpoints["net"]["version"] = static_return(str(chain_id))
        self.w3 = Web3(EthereumTesterProvider(self.tester, api_endpoints=endpoints))
        self.chain_id = chain_id
        self._bank = self.tester.get_accounts()[0]
        # Reads by (latest block hash, call gas, what was read), and the state reads of that block run on.
        self._reads: dict[tuple[Any, ...], Any] = {}
        self._read_state: tuple[bytes, bytes, Any] | None = None
        self._block_reads: list[int] = []  # PREVRANDAO / BLOCKHASH run by the current read

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
        """A read at the latest block, as ``eth_tester.call`` makes it (see :meth:`_fast_call`)."""
        output = self._fast_call(to, data) if self.fast_reads else None
        return self._tester_call(to, data) if output is None else output

    def _fast_call(self, to: str, data: str) -> bytes | None:
        """``eth_call``'s return data, on one state per block; None where the call failed or could not
        be prepared (the caller then makes it the usual way, so that it raises what it raised).

        eth-tester builds a fresh state (cold trie caches) and looks up the caller's nonce on another
        one for every call; here the reads of one block share a state, each run undone by a snapshot
        revert as py-evm's own gas estimator does, and a read already made is answered from memory: at
        the same block (its hash fixes everything a call can see), or at a block that differs from it only
        in its random ``mix_hash`` and its ancestry (a reset that replays the same set-up) where the run
        read neither PREVRANDAO nor BLOCKHASH, the only opcodes that see those.
        """
        try:
            exact, loose, state, gas = self._read_context()
            exact_key, loose_key = (*exact, "call", to, data), (*loose, "call", to, data)
            for key in (exact_key, loose_key):
                if key in self._reads:
                    return self._reads[key]
            self._block_reads.clear()
            tx = {"from": self._bank, "to": to, "data": data}
            self.tester.validator.validate_inbound_transaction(tx, txn_internal_type="call")
            raw = self.tester.normalizer.normalize_inbound_transaction(tx)
            raw.update(gas=gas, nonce=state.get_nonce(raw["from"]))
            backend = self.tester.backend
            unsigned = backend._get_normalized_and_unsigned_evm_transaction(raw, "latest")
            snapshot = state.snapshot()
            try:
                computation = state.apply_transaction(_spoof_transaction(unsigned, raw["from"]))
            finally:
                state.revert(snapshot)
        except Exception:  # noqa: BLE001  (the usual path gives the exact error)
            return None
        if computation.is_error:
            return None
        output = bytes(computation.output)
        self._remember(exact_key, output)
        if not self._block_reads:
            self._remember(loose_key, output)
        return output

    def database_copy(self) -> dict[bytes, bytes]:
        """A copy of the whole chain database (blocks, receipts, state) for :meth:`load_database`."""
        return dict(self.tester.backend.chain.chaindb.db.wrapped_db.kv_store)

    def load_database(self, kv: dict[bytes, bytes]) -> None:
        """Continue from a copy of ``kv`` (another :class:`EmbeddedChain`'s :meth:`database_copy`, same
        chain id), as if this chain had sent what that one sent. Only for a chain nothing was sent on."""
        from eth.db.atomic import AtomicDB
        from eth.db.backends.memory import MemoryDB

        from lynn.envs.evmquest.gas_search import replayed_gas_search

        backend = self.tester.backend
        # The same per-backend chain class (chain id, block time, gas estimator); its head is kv's head.
        backend.chain = type(backend.chain)(AtomicDB(MemoryDB(dict(kv))))
        backend.chain.gas_estimator = replayed_gas_search
        self._reads.clear()
        self._read_state = None

    def _tester_call(self, to: str, data: str) -> bytes:
        # Straight to eth-tester: web3's middleware stack triples the cost of a read.
        result = self.tester.call({"from": self._bank, "to": to, "data": data}, "latest")
        return bytes.fromhex(result[2:]) if isinstance(result, str) else bytes(result)

    def get_balance(self, address: str) -> int:
        if not self.fast_reads or not isinstance(address, str) or not _is_checksum(address):
            return super().get_balance(address)  # web3 refuses it with its own error
        from eth_utils import to_canonical_address

        try:
            _, loose, state, _ = self._read_context()
            key = (*loose, "balance", address)  # a balance is the state's alone
            if key not in self._reads:
                self._remember(key, int(state.get_balance(to_canonical_address(address))))
            return self._reads[key]
        except Exception:  # noqa: BLE001  (web3's path gives the exact error)
            return super().get_balance(address)

    def _read_context(self) -> tuple[tuple[Any, ...], tuple[Any, ...], Any, int]:
        """``(exact key, loose key, state at the latest block, gas a call gets)``, as eth-tester picks
        them for block "latest": the canonical block below the pending one, and the pending block's free
        gas. The loose key is the block's hash with ``mix_hash`` and ``parent_hash`` zeroed."""
        chain = self.tester.backend.chain
        pending = chain.get_block().header
        latest = chain.get_canonical_block_header_by_number(pending.block_number - 1)
        if self._read_state is None or self._read_state[0] != latest.hash:
            state = chain.get_vm(at_header=latest).state
            state.computation_class = _block_reading(state.computation_class, self._block_reads)
            loose = latest.copy(mix_hash=b"\0" * 32, parent_hash=b"\0" * 32).hash
            self._read_state = (latest.hash, loose, state)
        gas = pending.gas_limit - pending.gas_used
        _, loose, state = self._read_state
        return (latest.hash, gas), (loose, gas), state, gas

    def _remember(self, key: tuple[Any, ...], value: Any) -> None:
        if len(self._reads) >= 4096:  # per-seed states would grow it without end
            self._reads.clear()
        self._reads[key] = value

    def raw_request(self, method: str, params: list[Any]) -> Any:
        # The sandbox proxy's plain reads at "latest" take the fast path (same answers, see the test).
        if self.fast_reads and len(params) == 2 and params[1] == "latest":
            call = params[0]
            if method == "eth_call" and isinstance(call, dict) and set(call) == {"to", "data"}:
                to, data = call["to"], call["data"]
                if isinstance(to, str) and isinstance(data, str) and _is_checksum(to):
                    output = self._fast_call(to, data)
                    if output is not None:
                        return "0x" + output.hex()
            elif method == "eth_getBalance" and isinstance(call, str) and _is_checksum(call):
                return self.get_balance(call)
        if self.fast_reads and method == "eth_chainId" and not params:
            return self.chain_id  # a static answer (set in __init__)
        # The tester provider takes python-typed params; the manager's middleware stack converts
        # wire hex params, and Web3.to_json turns HexBytes/AttributeDict results back into JSON.
        result = self.w3.manager.request_blocking(method, params)  # type: ignore[arg-type]
        return json.loads(Web3.to_json(result)) if not isinstance(result, (int, str, type(None))) else result


_BLOCKHASH, _PREVRANDAO = 0x40, 0x44


def _block_reading(base: type, seen: list[int]) -> type:
    """``base`` with BLOCKHASH and PREVRANDAO noting themselves in ``seen`` (same semantics, same gas)."""
    opcodes = dict(base.opcodes)  # type: ignore[attr-defined]

    def noting(op: int) -> Any:
        original = opcodes[op]

        def run(computation: Any) -> None:
            seen.append(op)
            original(computation=computation)

        run.mnemonic = original.mnemonic  # type: ignore[attr-defined]  # py-evm's debug2 log reads it
        return run

    for op in (_BLOCKHASH, _PREVRANDAO):
        opcodes[op] = noting(op)
    return type(f"BlockReading{base.__name__}", (base,), {"opcodes": opcodes})


def _spoof_transaction(unsigned: Any, sender: bytes) -> Any:
    from eth.vm.spoof import SpoofTransaction

    return SpoofTransaction(unsigned, from_=sender)


def _is_checksum(address: str) -> bool:
    from eth_utils import is_checksum_address

    return bool(is_checksum_address(address))


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
        # While batched() runs (in its own thread only): "record" the reads, then "serve" them.
        self._mode: str | None = None
        self._owner = 0
        self._recorded: dict[str, tuple[str, Any, Any]] = {}
        self._served: dict[str, Any] = {}
        # The last real results, the stand-ins when recording: by exact call, and by contract function.
        self._last_exact: dict[str, Any] = {}
        self._last: dict[tuple[str, ...], Any] = {}

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

    def make_request(self, method: Any, params: Any) -> Any:
        if self._mode is not None and self._owner == threading.get_ident():
            key = _read_key(method, params)
            if self._mode == "record":
                if key is None:  # not a plain read: stop recording here, send nothing
                    raise _RecordingStopped(method)
                if key not in self._recorded:
                    placeholder = self._last_exact.get(
                        key, self._last.get(_placeholder_key(method, params), _READ_PLACEHOLDERS[method])
                    )
                    self._recorded[key] = (method, params, placeholder)
                return {"jsonrpc": "2.0", "id": 0, "result": self._recorded[key][2]}
            if key is None:  # not a plain read: it may change the state, so the batch is stale from here
                self._mode, self._served = None, {}
            elif key in self._served:
                return {"jsonrpc": "2.0", "id": 0, "result": self._served[key]}
        response = super().make_request(method, params)
        if method in _READ_PLACEHOLDERS and isinstance(response, dict) and response.get("result") is not None:
            self._remember(_read_key(method, params), method, params, response["result"])
        return response

    def _remember(self, key: str | None, method: str, params: Any, result: Any) -> None:
        if len(self._last_exact) >= 4096:  # per-seed calls (fresh recipients) would grow it without end
            self._last_exact.clear()
        if key is not None:
            self._last_exact[key] = result
        self._last[_placeholder_key(method, params)] = result

    def batched(self, read: Callable[[], _T]) -> _T:
        """Run ``read`` with its reads made in one JSON-RPC batch.

        ``read`` must only read the chain, and its result must depend on nothing but what it reads
        (and its own arguments). First its read calls are recorded and answered with stand-ins (the
        same call's last real result, else that of the same contract function, else zeros); nothing
        reaches the node, and a call that is not a plain read ends the pass, as does any error a
        stand-in causes. The recorded calls then go out as one batch: the node's state, since nothing
        runs in between. If every stand-in was what the node answered, that first pass was exact and
        its result is returned; otherwise ``read`` runs again, each call answered from the batch until
        it makes a call that is not a plain read. A call the batch did not hold, or that failed in it,
        goes to the node as usual, so the result and any error are those of ``read()``.
        """
        if self._mode is not None:  # nested: the outer pass decides
            return read()
        self._owner, self._recorded, self._mode = threading.get_ident(), {}, "record"
        exact, first = True, None
        try:
            first = read()
        except Exception:  # noqa: BLE001  (a stand-in led the pass astray; what it recorded still counts)
            exact = False
        finally:
            self._mode = None
        recorded, self._recorded = self._recorded, {}
        served: dict[str, Any] = {}
        if recorded:
            try:
                responses = self.batch([(method, params) for method, params, _ in recorded.values()])
            except (ChainError, http.client.HTTPException, OSError, ValueError):
                responses = []  # no batch: every read goes to the node one by one, as without batching
            exact = exact and len(responses) == len(recorded)
            for (key, (method, params, placeholder)), response in zip(
                recorded.items(), responses, strict=False
            ):
                result = response.get("result")
                exact = exact and result is not None and result == placeholder
                if result is not None:
                    served[key] = result
                    self._remember(key, method, params, result)
        if exact:
            return first  # type: ignore[return-value]
        self._served, self._mode = served, "serve"
        try:
            return read()
        finally:
            self._mode, self._served = None, {}

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


class _RecordingStopped(Exception):
    """A call that is not a plain read was made while a batched read was recording its calls."""


def _read_key(method: str, params: Any) -> str | None:
    """The cache key of a plain read (``None`` for anything else)."""
    if method not in _READ_PLACEHOLDERS:
        return None
    try:
        return json.dumps([method, params], sort_keys=True)
    except TypeError:
        return None


def _placeholder_key(method: str, params: Any) -> tuple[str, ...]:
    """Calls whose results share a shape: the same contract function, else the same method."""
    if method == "eth_call" and params and isinstance(params[0], dict):
        call = params[0]
        return (method, str(call.get("to", "")).lower(), str(call.get("data", ""))[:10])
    return (method,)


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

    #: Make a :meth:`read_batched` read's calls in one batch (False: one request a call, as before).
    batch_reads = True

    def read_batched(self, read: Callable[[], _T]) -> _T:
        provider = self.w3.provider
        if not self.batch_reads or not isinstance(provider, _KeepAliveProvider):
            return read()
        return provider.batched(read)


class SnapshotPool:
    """Snapshot ids of one state, oldest first; :meth:`AnvilChain.revert` uses the newest."""

    def __init__(self, ids: list[str]) -> None:
        self.ids = ids

    def __repr__(self) -> str:
        return f"SnapshotPool({self.ids})"


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

    #: Snapshots taken at once (see :meth:`snapshot`); 1: revert, then take the snapshot again.
    snapshot_pool = 16

    def snapshot(self) -> Any:
        """Take :attr:`snapshot_pool` snapshots of the current state in one batch; returns them as a
        :class:`SnapshotPool` for :meth:`revert`."""
        if self.snapshot_pool <= 1:
            return super().snapshot()
        return SnapshotPool(self._take_snapshots(self.snapshot_pool))

    def revert(self, snapshot_id: Any) -> Any:
        """Revert to ``snapshot_id`` (a :class:`SnapshotPool` or a plain id); returns what the next
        revert takes.

        anvil's ``evm_revert`` drops the id it reverts to and every id taken after it, and keeps the
        older ones: a pool of ids taken at one state, used highest first, gives one revert per reset
        with no ``evm_snapshot`` after it; the pool is taken again (one batch) once it is used up.
        """
        if not isinstance(snapshot_id, SnapshotPool):
            return super().revert(snapshot_id)
        pool = snapshot_id
        sid = pool.ids.pop()
        if self.raw_request("evm_revert", [sid]) is not True:
            raise ChainError(f"evm_revert({sid}) refused by {self.name}")
        if not pool.ids:  # the state is the snapshot's again: take the next pool here
            pool.ids.extend(self._take_snapshots(self.snapshot_pool))
        return pool

    def _take_snapshots(self, n: int) -> list[str]:
        provider = self.w3.provider
        if isinstance(provider, _KeepAliveProvider):
            # The calls of a batch run concurrently in anvil; these only read the state, so any order
            # gives n ids of the same state.
            responses = provider.batch([("evm_snapshot", [])] * n)
            if any(r.get("result") is None for r in responses):
                raise ChainError(f"evm_snapshot refused by {self.name}: {responses}")
            ids = [str(r["result"]) for r in responses]
        else:
            ids = [str(self.raw_request("evm_snapshot", [])) for _ in range(n)]
        return sorted(ids, key=lambda i: int(i, 16))

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
