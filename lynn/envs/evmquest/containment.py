"""The containment layer every agent script runs in, whatever its language.

One design, used by :mod:`~lynn.envs.evmquest.sandbox` (Python scripts) and
:mod:`~lynn.envs.evmquest.typescript` (TypeScript under Bun):

* **Env side** (:class:`ScriptSandbox`): takes a fork server (``python -m MODULE FD [CONFIG]``;
  by default shared by the process's sandboxes of its kind, one job at a time each, started
  when none is idle or the last one died), hands it one fresh socket pair per script
  (``SCM_RIGHTS``) with that script's limits, answers the script's
  newline-delimited JSON-RPC from a **whitelist of read methods** (:data:`READ_METHODS`, plus
  ``eth_signTypedData_v4`` for the agent's own address, signed by the env: the key never leaves
  it; anything else is refused and recorded as a violation), enforces the wall-clock limit and
  kills the child when it is exceeded.
* **Server side** (:func:`serve_jobs`): one job at a time, one forked child per job, the exit
  status reported back (the CPU limit's ``SIGXCPU`` and, with a memory cgroup, an out-of-memory
  kill named as such).
* **Child side**: the primitives each language's child calls before it touches the script:
  :func:`enter_namespaces` (new network and mount namespaces: only a down loopback),
  :func:`mount_scratch` (a small ``noexec`` tmpfs the child chroots into), :func:`set_rlimits`,
  :func:`drop_to_nobody` (uid/gid 65534) and :func:`seccomp_filter` (no ``socket``,
  ``execve``, ``fork``/``vfork``/``clone`` without ``CLONE_THREAD``, ``clone3``, ``ptrace``,
  namespace or mount calls).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

READ_METHODS = frozenset(
    {
        "eth_chainId",
        "net_version",
        "eth_blockNumber",
        "eth_getBalance",
        "eth_getCode",
        "eth_getStorageAt",
        "eth_call",
        "eth_estimateGas",
        "eth_gasPrice",
        "eth_maxPriorityFeePerGas",
        "eth_feeHistory",
        "eth_getTransactionCount",
        "eth_getBlockByNumber",
        "eth_getBlockByHash",
        "eth_getTransactionByHash",
        "eth_getTransactionReceipt",
        "eth_getLogs",
        "eth_accounts",
        "eth_syncing",
        "web3_clientVersion",
    }
)
SIGN_METHOD = "eth_signTypedData_v4"
MAX_MESSAGE = 1 << 20  # bytes: a request or the result larger than this is refused
MAX_RPC_CALLS = 400
NOBODY = 65534


@dataclass(frozen=True)
class SandboxLimits:
    """Limits of one script run."""

    wall_s: float = 10.0
    cpu_s: int = 5
    memory_bytes: int = 1 << 30
    file_bytes: int = 1 << 20
    scratch_bytes: int = 16 << 20
    open_files: int = 64


@dataclass
class ScriptResult:
    """Outcome of one script: ``value`` is what the script's entry point returned (when ``ok``)."""

    ok: bool
    value: Any = None
    error: str | None = None
    stdout: str = ""
    rpc_calls: int = 0
    violations: list[str] = field(default_factory=list)
    wall_s: float = 0.0


# ----------------------------------------------------------------------------- framing
def send_msg(sock: socket.socket, obj: Any, fds: list[int] | None = None) -> None:
    """One length-prefixed JSON message on the control channel, optionally with descriptors."""
    data = json.dumps(obj).encode()
    payload = struct.pack("!I", len(data)) + data
    if fds:
        socket.send_fds(sock, [payload], fds)
    else:
        sock.sendall(payload)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError("control channel closed")
        buf += chunk
    return buf


def recv_msg(sock: socket.socket, with_fds: bool = False) -> tuple[Any, list[int]]:
    """The next message of :func:`send_msg` and the descriptors that came with it."""
    fds: list[int] = []
    if with_fds:
        head, fds, _flags, _addr = socket.recv_fds(sock, 4, 4)
        if not head:
            raise EOFError("control channel closed")
        head += _recv_exact(sock, 4 - len(head)) if len(head) < 4 else b""
    else:
        head = _recv_exact(sock, 4)
    (length,) = struct.unpack("!I", head)
    return json.loads(_recv_exact(sock, length)), fds


# ----------------------------------------------------------------------------- env side
class _Server:
    """One running fork server (``python -m MODULE FD [CONFIG]``) and its control channel.

    A server runs one job at a time; whoever holds it (:func:`_checkout`) owns the channel for the
    whole job, so two jobs' messages never interleave. Only the process that started it ever stops
    it: a forked copy of this object (``owner`` differs) just closes its copy of the channel.
    """

    def __init__(self, module: str, config: list[str], stderr: bool, name: str) -> None:
        self.owner = os.getpid()
        self.control, child_end = socket.socketpair()
        self.process = subprocess.Popen(
            [sys.executable, "-m", module, str(child_end.fileno()), *config],
            pass_fds=[child_end.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=None if stderr else subprocess.PIPE,
            env={k: v for k, v in os.environ.items() if k in ("PATH", "PYTHONPATH", "LANG", "HOME")},
        )
        child_end.close()
        cgroups: list[str] = []  # removed once the server has stopped (its scripts are all gone then)
        self._finalizer = weakref.finalize(
            self, _shutdown_if_owner, self.owner, self.process, self.control, cgroups
        )
        try:
            ready, _ = recv_msg(self.control)
        except EOFError:
            err = self.process.stderr.read().decode(errors="replace") if self.process.stderr else ""
            self.close()
            raise RuntimeError(f"{name} failed to start: {err[-800:]}") from None
        self.isolation: dict[str, Any] = ready.get("isolation", {})
        if ready.get("cgroup"):
            cgroups.append(str(ready["cgroup"]))

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        self._finalizer()


def _shutdown_if_owner(
    owner: int, process: subprocess.Popen[bytes], control: socket.socket, cgroups: Sequence[str]
) -> None:
    if os.getpid() == owner:
        shutdown_server(process, control, cgroups)
    else:  # a forked copy: the server belongs to the parent
        try:
            control.close()
        except OSError:
            pass


# Shared servers: (pid, module, config, stderr) -> the idle servers of that key. The pid in the key
# keeps a forked child from ever using its parent's servers (it starts its own).
SHARED_LINGER_S = 3.0  # an unused key's idle servers stop this long after its last sandbox closed
_IDLE: dict[tuple[Any, ...], list[_Server]] = {}
_USERS: dict[tuple[Any, ...], int] = {}
_SHARED_LOCK = threading.Lock()


def _release_key(key: tuple[Any, ...]) -> None:
    """Stop the key's idle servers if no sandbox uses the key (any more)."""
    with _SHARED_LOCK:
        if _USERS.get(key, 0) > 0:
            return
        servers = _IDLE.pop(key, [])
    for server in servers:
        server.close()


def shared_server_pids() -> list[int]:
    """Process ids of this process's idle shared fork servers (all kinds)."""
    with _SHARED_LOCK:
        return [s.process.pid for k, v in _IDLE.items() if k[0] == os.getpid() for s in v]


class ScriptSandbox:
    """Runs one script at a time in a fresh contained child of a fork server (:meth:`run`).

    By default (``shared=True``) the sandboxes of one process share their fork servers: a job
    takes an idle server of its kind (same module, configuration and stderr) for its whole length,
    or starts one when none is idle (so concurrent jobs from several threads each get their own);
    the server goes back to the idle list afterwards. Every script still runs in its own freshly
    forked child, the limits travel with each job, and a server found dead is replaced. The idle
    servers of a kind stop :data:`SHARED_LINGER_S` after the process's last sandbox of that kind
    closed (or at exit). ``shared=False`` gives the sandbox a server of its own, stopped by
    :meth:`close`.

    Subclasses name the server's module (:attr:`server_module`, run as ``python -m``) and what
    it is called in errors (:attr:`server_name`).

    Args:
        limits: per-script limits.
        config: extra command-line arguments of the server (after its control descriptor).
        stderr: whether the server's stderr goes through to the env's (otherwise it is read
            only to explain a failed start).
        shared: share fork servers with the process's other sandboxes of the same kind.
    """

    server_module = ""
    server_name = "sandbox fork server"

    def __init__(
        self,
        limits: SandboxLimits | None = None,
        config: list[str] | None = None,
        stderr: bool = False,
        shared: bool = True,
    ) -> None:
        self.limits = limits or SandboxLimits()
        self.shared = shared
        self._config = list(config or [])
        self._stderr = stderr
        self._closed = False
        self._own: _Server | None = None
        self._own_lock = threading.Lock()
        self._users: dict[tuple[Any, ...], weakref.finalize] = {}  # key -> its _drop_user
        # Start (or find) a server now: a failed start is reported at construction, as before.
        server = self._checkout()
        self._server = server
        self.isolation: dict[str, Any] = server.isolation
        self._checkin(server)

    @property
    def pid(self) -> int:
        """The fork server this sandbox used last (its own one with ``shared=False``)."""
        return self._server.process.pid

    @property
    def process(self) -> subprocess.Popen[bytes]:
        return self._server.process

    @property
    def _key(self) -> tuple[Any, ...]:
        """Which shared servers this sandbox may use: the current process's of its kind."""
        return (os.getpid(), self.server_module, tuple(self._config), self._stderr)

    def _start(self) -> _Server:
        return _Server(self.server_module, self._config, self._stderr, self.server_name)

    def _checkout(self) -> _Server:
        """A live server held for one job (started if none is idle)."""
        if self._closed:
            raise RuntimeError(f"{self.server_name}: the sandbox is closed")
        if not self.shared:
            self._own_lock.acquire()
            if self._own is None or not self._own.alive() or self._own.owner != os.getpid():
                if self._own is not None:
                    self._own.close()
                try:
                    self._own = self._start()
                except BaseException:
                    self._own_lock.release()
                    raise
            return self._own
        key = self._key
        dead: list[_Server] = []
        server = None
        with _SHARED_LOCK:
            if key not in self._users:  # first use in this process: count this sandbox in
                _USERS[key] = _USERS.get(key, 0) + 1
                self._users[key] = weakref.finalize(self, _drop_user, key)
            idle = _IDLE.get(key, [])
            while idle and server is None:
                candidate = idle.pop()
                if candidate.alive():
                    server = candidate
                else:
                    dead.append(candidate)
        for d in dead:
            d.close()
        return server if server is not None else self._start()

    def _checkin(self, server: _Server) -> None:
        if not self.shared:
            self._own_lock.release()
            return
        if not server.alive():
            server.close()
            return
        key = self._key
        with _SHARED_LOCK:
            if _USERS.get(key, 0) > 0 and server.owner == key[0]:
                _IDLE.setdefault(key, []).append(server)
                return
        server.close()  # the last sandbox of its kind closed meanwhile

    def run(
        self,
        source: str,
        agent_address: str,
        contracts: dict[str, str],
        handle_rpc: Callable[[str, list[Any]], Any],
    ) -> ScriptResult:
        """Run ``source`` in a fresh contained child and return its result.

        Args:
            source: the script (its language's entry point, e.g. Python's
                ``execute_skill(w3, agent_address, contracts)``).
            agent_address: passed to the script.
            contracts: display name -> address, passed to the script.
            handle_rpc: answers one whitelisted JSON-RPC call (wire params, wire result); it may
                raise ``PermissionError`` (recorded as a violation) or any error (sent back).
        """
        job = {
            "source": source,
            "agent_address": agent_address,
            "contracts": contracts,
            "limits": self.limits.__dict__,
        }
        for attempt in (0, 1):
            try:
                server = self._checkout()
            except RuntimeError as exc:
                return ScriptResult(ok=False, error=str(exc))
            self._server = server
            start = time.monotonic()
            mine, theirs = socket.socketpair()
            pid = 0
            try:
                try:
                    send_msg(server.control, job, fds=[theirs.fileno()])
                finally:
                    theirs.close()
                started, _ = recv_msg(server.control)
                pid = int(started["pid"])
                result = self._serve(mine, pid, start, handle_rpc)
                mine.close()
                exit_msg, _ = recv_msg(server.control)
            except (EOFError, OSError):  # the server died (was killed) under this job
                mine.close()
                if pid:
                    _kill(pid)
                server.close()
                self._checkin(server)
                if not pid and not attempt:
                    continue  # the script never started: run it on a new server
                return ScriptResult(
                    ok=False,
                    error=f"{self.server_name} stopped during the script",
                    wall_s=time.monotonic() - start,
                )
            except BaseException:  # the channel is mid-job: nobody may use this server again
                mine.close()
                if pid:
                    _kill(pid)
                server.close()
                self._checkin(server)
                raise
            self._checkin(server)
            if not result.ok and result.error is None:
                result.error = f"script process ended without a result ({exit_msg.get('status', '')})"
            result.wall_s = time.monotonic() - start
            return result
        raise AssertionError("unreachable")

    def _serve(
        self, sock: socket.socket, pid: int, start: float, handle_rpc: Callable[[str, list[Any]], Any]
    ) -> ScriptResult:
        result = ScriptResult(ok=False)
        buf = b""
        deadline = start + self.limits.wall_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                _kill(pid)
                result.error = (
                    f"script exceeded the wall-clock limit of {self.limits.wall_s:g} s and was killed"
                )
                return result
            readable, _, _ = select.select([sock], [], [], remaining)
            if not readable:
                continue
            try:
                chunk = sock.recv(65536)
            except OSError:
                chunk = b""
            if not chunk:
                return result  # child died; the exit status says why
            buf += chunk
            if len(buf) > MAX_MESSAGE and b"\n" not in buf:
                _kill(pid)
                result.error = (
                    f"script sent a message larger than {MAX_MESSAGE} bytes (result or RPC request too large)"
                )
                return result
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                try:
                    msg = json.loads(line)
                except ValueError:
                    _kill(pid)
                    result.error = "script sent malformed data on the RPC channel"
                    return result
                if not isinstance(msg, dict):
                    _kill(pid)
                    result.error = "script sent malformed data on the RPC channel"
                    return result
                if msg.get("type") == "result":
                    result.ok = bool(msg.get("ok"))
                    result.value = msg.get("value")
                    result.error = None if result.ok else str(msg.get("error", "script failed"))[:4000]
                    result.stdout = str(msg.get("stdout", ""))[:4000]
                    return result
                reply = self._answer(msg, result, handle_rpc)
                try:
                    sock.sendall(json.dumps(reply).encode() + b"\n")
                except OSError:
                    return result

    def _answer(
        self, msg: dict[str, Any], result: ScriptResult, handle_rpc: Callable[[str, list[Any]], Any]
    ) -> dict[str, Any]:
        req_id = msg.get("id")
        method = msg.get("method")
        params = msg.get("params") or []
        result.rpc_calls += 1
        if result.rpc_calls > MAX_RPC_CALLS:
            return _rpc_error(req_id, -32005, f"RPC call limit of {MAX_RPC_CALLS} per script exceeded")
        if not isinstance(method, str) or not isinstance(params, list):
            return _rpc_error(req_id, -32600, "invalid request")
        if method not in READ_METHODS and method != SIGN_METHOD:
            result.violations.append(method)
            return _rpc_error(
                req_id, -32601, f"method {method} is not allowed by the EVMQuest read-only proxy"
            )
        try:
            return {"jsonrpc": "2.0", "id": req_id, "result": handle_rpc(method, params)}
        except PermissionError as exc:
            result.violations.append(f"{method}: {exc}")
            return _rpc_error(req_id, -32601, str(exc))
        except Exception as exc:
            return _rpc_error(req_id, -32000, str(exc)[:1000] or type(exc).__name__)

    def close(self) -> None:
        """Stop using the fork server (idempotent): its own one stops now, a shared one when unused."""
        if self._closed:
            return
        self._closed = True
        if self.shared:
            for drop in list(self._users.values()):
                drop()
        else:
            with self._own_lock:
                if self._own is not None:
                    self._own.close()

    def __enter__(self) -> ScriptSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _drop_user(key: tuple[Any, ...]) -> None:
    """One sandbox of ``key`` fewer; the last one's leaving stops the idle servers after a linger."""
    with _SHARED_LOCK:
        _USERS[key] = _USERS.get(key, 1) - 1
        last = _USERS[key] <= 0
    if last:
        if os.getpid() != key[0] or SHARED_LINGER_S <= 0 or sys.is_finalizing():
            _release_key(key)
        else:
            timer = threading.Timer(SHARED_LINGER_S, _release_key, (key,))
            timer.daemon = True
            try:
                timer.start()
            except RuntimeError:  # interpreter shutdown: no new threads
                _release_key(key)


def _rpc_error(req_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": req_id, "error": {"code": code, "message": message}}


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def shutdown_server(
    process: subprocess.Popen[bytes], control: socket.socket, cgroups: Sequence[str] = ()
) -> None:
    """Stop a fork server, then remove its memory cgroups (its scripts are all gone by then)."""
    try:
        control.close()
    except OSError:
        pass
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
    if process.stderr is not None:
        process.stderr.close()
    for path in cgroups:
        try:
            os.rmdir(path)
        except OSError:
            pass


# ----------------------------------------------------------------------------- server side
def serve_jobs(
    control: socket.socket,
    run_child: Callable[[socket.socket, dict[str, Any], str], None],
    prefix: str,
    cgroup: str | None = None,
    memory_bytes: int = 0,
) -> None:
    """Fork-server main loop: one job at a time, one forked child per job, until the env hangs up.

    Args:
        control: the server's end of the control channel (the ready message is already sent).
        run_child: runs in the forked child with the script's socket, the job and a fresh scratch
            directory; it must never return.
        prefix: of the temporary directory holding the scratch directories.
        cgroup: the scripts' memory cgroup (:func:`memory_cgroup`), to name an out-of-memory kill.
        memory_bytes: that cgroup's limit, as the kill's message states it.
    """
    base = tempfile.mkdtemp(prefix=prefix)
    try:
        while True:
            try:
                job, fds = recv_msg(control, with_fds=True)
            except (EOFError, OSError):
                return
            sock = socket.socket(fileno=fds[0])
            scratch = tempfile.mkdtemp(dir=base)
            pid = os.fork()
            if pid == 0:
                control.close()
                run_child(sock, job, scratch)
            sock.close()
            send_msg(control, {"pid": pid})
            ooms = oom_count(cgroup)
            _, status = os.waitpid(pid, 0)
            if os.WIFSIGNALED(status):
                sig = os.WTERMSIG(status)
                text = f"killed by {signal.Signals(sig).name}"
                if sig == signal.SIGXCPU:
                    text += " (CPU time limit)"
                elif oom_count(cgroup) > ooms:
                    text += f" (memory limit of {int(memory_bytes) >> 20} MiB)"
            else:
                text = f"exit code {os.WEXITSTATUS(status)}"
            shutil.rmtree(scratch, ignore_errors=True)
            send_msg(control, {"status": text})
    finally:
        shutil.rmtree(base, ignore_errors=True)


def memory_cgroup(limit: int, name: str) -> str | None:
    """A memory cgroup (v2 ``memory.max`` or v1 ``memory.limit_in_bytes``) for a server's scripts.

    None where no writable memory controller is mounted (the caller falls back to rlimits).
    """
    for base, knob in (("/sys/fs/cgroup", "memory.max"), ("/sys/fs/cgroup/memory", "memory.limit_in_bytes")):
        if not os.path.isfile(os.path.join(base, "cgroup.procs")) or not os.path.isfile(
            os.path.join(base, knob if base.endswith("memory") else "cgroup.controllers")
        ):
            continue
        path = os.path.join(base, name)
        try:
            os.makedirs(path, exist_ok=True)
            with open(os.path.join(path, knob), "w") as fh:
                fh.write(str(limit))
            swap = os.path.join(
                path, "memory.swap.max" if knob == "memory.max" else "memory.memsw.limit_in_bytes"
            )
            if os.path.exists(swap):
                try:
                    with open(swap, "w") as fh:
                        fh.write("0" if knob == "memory.max" else str(limit))
                except OSError:
                    pass
            return path
        except OSError:
            try:
                os.rmdir(path)
            except OSError:
                pass
    return None


def oom_count(cgroup: str | None) -> int:
    """Out-of-memory kills in ``cgroup`` so far (0 without one)."""
    if cgroup is None:
        return 0
    try:
        if os.path.isfile(os.path.join(cgroup, "memory.events")):
            with open(os.path.join(cgroup, "memory.events")) as fh:
                return sum(int(line.split()[1]) for line in fh if line.startswith(("oom_kill", "max ")))
        with open(os.path.join(cgroup, "memory.oom_control")) as fh:
            return sum(int(line.split()[1]) for line in fh if line.startswith("oom_kill "))
    except (OSError, ValueError):
        return 0


# ----------------------------------------------------------------------------- child side
MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
CLONE_NEWPID = 0x20000000
CLONE_THREAD = 0x00010000
# Refused to every script, whatever its language (EPERM).
DENIED_SYSCALLS = (
    "socket",
    "socketpair",
    "execveat",
    "fork",
    "vfork",
    "ptrace",
    "unshare",
    "setns",
    "mount",
    "umount2",
    "chroot",
    "pivot_root",
    "bpf",
    "perf_event_open",
    "keyctl",
    "add_key",
    "request_key",
    "process_vm_readv",
    "process_vm_writev",
    "kexec_load",
    "init_module",
    "finit_module",
)


def libc_mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    """``mount(2)``; raises ``OSError`` on failure."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    enc = [None if v is None else v.encode() for v in (source, target, fstype, data)]
    if libc.mount(enc[0], enc[1], enc[2], flags, enc[3]) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def libc_unshare(flags: int) -> None:
    """``unshare(2)``; raises ``OSError`` on failure."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(flags) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def enter_namespaces(extra: int = 0) -> None:
    """New network and mount namespaces (plus ``extra`` flags); a user namespace too unless root.

    Raises:
        OSError: the kernel refused (the caller must not run the script then).
    """
    libc_unshare((0 if os.geteuid() == 0 else CLONE_NEWUSER) | CLONE_NEWNS | CLONE_NEWNET | extra)


def mount_scratch(scratch: str, limits: dict[str, Any], mode: str) -> None:
    """Makes mounts private, then mounts a small ``noexec`` tmpfs (owned by nobody under root) on ``scratch``."""
    libc_mount(None, "/", None, MS_REC | MS_PRIVATE, None)
    owner = f",uid={NOBODY},gid={NOBODY}" if os.geteuid() == 0 else ""
    options = f"size={limits['scratch_bytes']},nr_inodes=256,mode={mode}{owner}"
    libc_mount("tmpfs", scratch, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, options)


def bind_file(source: str, root: str, inside: str) -> None:
    """Bind-mounts the file ``source`` read-only at ``root + inside``."""
    target = root + inside
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, "wb"):
        pass
    libc_mount(os.path.realpath(source), target, None, MS_BIND, None)
    libc_mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, None)


def set_rlimits(limits: dict[str, Any], memory: tuple[int, int]) -> None:
    """CPU, the memory bound ``(resource, bytes)``, file size, descriptors; no core dumps."""
    import resource

    resource.setrlimit(resource.RLIMIT_CPU, (limits["cpu_s"], limits["cpu_s"] + 1))
    resource.setrlimit(memory[0], (memory[1], memory[1]))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["file_bytes"], limits["file_bytes"]))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits["open_files"], limits["open_files"]))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def drop_to_nobody() -> bool:
    """Under root, become uid/gid 65534 with no groups; whether it did."""
    if os.geteuid() != 0:
        return False
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)
    return True


def seccomp_filter(exec_path_address: int | None = None, extra: tuple[str, ...] = ()) -> Any:
    """The seccomp filter a child loads last: :data:`DENIED_SYSCALLS` and ``extra`` refused.

    ``execve`` is refused outright, or, given ``exec_path_address``, for every path but the
    one buffer at that address (the child's own start of its runner). New processes are
    refused (``clone`` without ``CLONE_THREAD``); ``clone3`` answers ``ENOSYS`` (its flags
    live in memory seccomp cannot read), so glibc falls back to ``clone``.
    """
    import errno

    import pyseccomp as sc

    f = sc.SyscallFilter(sc.ALLOW)
    deny = sc.ERRNO(errno.EPERM)
    for name in (*DENIED_SYSCALLS, *extra):
        f.add_rule(deny, name)
    if exec_path_address is None:
        f.add_rule(deny, "execve")
    else:
        f.add_rule(deny, "execve", sc.Arg(0, sc.NE, exec_path_address))
    f.add_rule(deny, "clone", sc.Arg(0, sc.MASKED_EQ, CLONE_THREAD, 0))
    f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    return f
