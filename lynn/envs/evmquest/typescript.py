"""TypeScript/ethers v6 agent scripts for Lynn/EVMQuest-v0, run by Bun in the same containment as Python.

An agent script is TypeScript that exports, as EVM-QuestBench's agents write it::

    export async function executeSkill(providerUrl: string, agentAddress: string,
                                       deployedContracts: Record<string, string>)

returning an unsigned transaction (``{to, data, value}``; ethers' ``gasLimit`` is read as ``gas``;
bigints stay exact) or ``{query_result: ...}``. ``import { ethers } from "ethers"`` (ethers 6, the
whole package) is available; nothing else is.

Runner: **Bun** (npm package ``bun``), chosen over node 20 + ``tsx`` on this machine: Bun
transpiles TypeScript in-process, while ``tsx`` starts an ``esbuild`` service as a child process
on every new script (which the containment forbids), and node alone takes ~0.7 s to start
under load here against Bun's ~0.1 s (figures in ``docs/evmquest-fidelity.md``).

Containment (:class:`TypeScriptSandbox`, the same promises as :mod:`lynn.envs.evmquest.sandbox`):
a small Python fork server forks a child per script which, before ``execve``-ing Bun, closes every
descriptor but the RPC socket (moved to fd 3), clears the environment, enters new network and
mount namespaces (only a down loopback), mounts a 16 MiB ``noexec`` tmpfs and bind-mounts into it,
read-only, exactly the Bun binary, the dynamic loader and the four libc libraries Bun links, and
the harness bundle (:file:`ts/harness.ts` with ethers, built once by ``bun build`` and cached);
chroots into it, sets rlimits (CPU, writable memory via ``RLIMIT_DATA``, file size, descriptors,
threads), drops to uid/gid 65534 and loads a seccomp filter refusing ``socket``, ``socketpair``,
``fork``/``vfork``/``clone`` without ``CLONE_THREAD``, ``clone3``, ``execveat``, ``ptrace``,
namespace and mount calls — and ``execve`` of anything but the one path buffer the child itself
uses to start Bun. The chain is reached only through the env's read-only JSON-RPC proxy on fd 3
(:meth:`Sandbox._serve` answers it): the harness routes ethers' ``FetchRequest`` and ``fetch``
for ``providerUrl`` to it and refuses every other URL. ``LYNN_TS_DEBUG=1`` lets Bun's own stderr
(crash reports) through to the env's stderr; ``TypeScriptSandbox.isolation["memory"]`` says whether
the memory bound is a cgroup or the ``RLIMIT_DATA`` fallback.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

from lynn.envs.evmquest.sandbox import (
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWUSER,
    CLONE_THREAD,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_REC,
    NOBODY,
    Sandbox,
    SandboxLimits,
    _libc_mount,
    _libc_unshare,
    _recv_msg,
    _send_msg,
    _shutdown_server,
)

ROOT = Path(__file__).resolve().parents[3]
HARNESS = Path(__file__).with_name("ts") / "harness.ts"
PROVIDER_URL = "http://evmquest-rpc.sandbox/"
MS_RDONLY = 0x1
MS_REMOUNT = 0x20
MS_BIND = 0x1000
BUN_IN_ROOT = "/bun"
HARNESS_IN_ROOT = "/harness.js"


def bun_path() -> Path:
    """The Bun binary: ``$LYNN_BUN`` or the npm package's ``node_modules/bun/bin/bun.exe``.

    Raises:
        FileNotFoundError: naming ``make node`` (``npm ci``) when it is not installed.
    """
    env = os.environ.get("LYNN_BUN")
    path = Path(env) if env else ROOT / "node_modules" / "bun" / "bin" / "bun.exe"
    if not path.is_file() or path.stat().st_size < 1 << 20:
        raise FileNotFoundError(
            f"Bun is not installed at {path} (TypeScript scripts need it): run `make node` (npm ci) "
            "in the repository, or set LYNN_BUN to a bun binary"
        )
    return path


def harness_bundle(bun: Path | None = None) -> Path:
    """Build (once, cached by content) the harness bundled with ethers; return the bundle's path.

    ``bun build --minify --bytecode`` also writes ``harness.js.jsc`` (JavaScriptCore bytecode) next
    to it, which roughly halves Bun's start-up on the bundle.
    """
    bun = bun or bun_path()
    ethers_pkg = ROOT / "node_modules" / "ethers" / "package.json"
    if not ethers_pkg.is_file():
        raise FileNotFoundError(f"ethers is not installed ({ethers_pkg}): run `make node` (npm ci)")
    key = hashlib.sha256(HARNESS.read_bytes() + ethers_pkg.read_bytes() + str(bun.stat().st_size).encode())
    cache = ROOT / "node_modules" / ".cache" / "lynn-evmquest"
    out_dir = cache / f"harness-{key.hexdigest()[:16]}"
    out = out_dir / "harness.js"
    if out.is_file():
        return out
    cache.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".harness-", dir=cache))
    proc = subprocess.run(
        [str(bun), "build", str(HARNESS), "--target=bun", "--minify", "--bytecode", f"--outdir={tmp}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if proc.returncode != 0 or not (tmp / "harness.js").is_file():
        shutil.rmtree(tmp, ignore_errors=True)
        raise RuntimeError(
            f"bun build of the TypeScript harness failed: {(proc.stderr or proc.stdout)[-800:]}"
        )
    try:
        os.replace(tmp, out_dir)
    except OSError:  # another process built it first
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def shared_libraries(binary: Path) -> list[str]:
    """Absolute paths of the shared objects ``binary`` loads (its interpreter included), via ldd."""
    proc = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, timeout=30, check=False)
    libs: list[str] = []
    for line in proc.stdout.splitlines():
        parts = line.split()
        if "=>" in parts:
            target = parts[parts.index("=>") + 1]
            if target.startswith("/"):
                libs.append(target)
        elif parts and parts[0].startswith("/"):
            libs.append(parts[0])
    if not libs:
        raise RuntimeError(f"cannot list the shared libraries of {binary}: {proc.stderr[-400:]}")
    return libs


class TypeScriptSandbox(Sandbox):
    """Runs TypeScript agent scripts under Bun; same interface and results as :class:`Sandbox`.

    Args:
        limits: per-script limits (``memory_bytes`` bounds the writable memory, ``RLIMIT_DATA``:
            JavaScript engines reserve far more address space than they use).
    """

    def __init__(self, limits: SandboxLimits | None = None) -> None:
        self.limits = limits or SandboxLimits()
        bun = bun_path()
        bundle = harness_bundle(bun)
        config = {
            "bun": str(bun),
            "bundle": str(bundle),
            "libs": shared_libraries(bun),
            "memory_bytes": self.limits.memory_bytes,
            "debug": bool(os.environ.get("LYNN_TS_DEBUG")),  # Bun's stderr reaches the env's stderr
        }
        self._control, child_end = socket.socketpair()
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "lynn.envs.evmquest.typescript",
                str(child_end.fileno()),
                json.dumps(config),
            ],
            pass_fds=[child_end.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=None if config["debug"] else subprocess.PIPE,
            env={k: v for k, v in os.environ.items() if k in ("PATH", "PYTHONPATH", "LANG", "HOME")},
        )
        child_end.close()
        cgroups: list[str] = []
        self._finalizer = weakref.finalize(self, _shutdown, self.process, self._control, cgroups)
        try:
            ready, _ = _recv_msg(self._control)
        except EOFError:
            err = self.process.stderr.read().decode(errors="replace") if self.process.stderr else ""
            self.close()
            raise RuntimeError(f"TypeScript sandbox server failed to start: {err[-800:]}") from None
        self.isolation: dict[str, Any] = ready.get("isolation", {})
        if ready.get("cgroup"):
            cgroups.append(str(ready["cgroup"]))

    def _answer(
        self, msg: dict[str, Any], result: Any, handle_rpc: Callable[[str, list[Any]], Any]
    ) -> dict[str, Any]:
        reply = super()._answer(msg, result, handle_rpc)
        if "result" in reply:
            reply["result"] = _hex_quantities(reply["result"])
        return reply


def _shutdown(process: subprocess.Popen[bytes], control: socket.socket, cgroups: list[str]) -> None:
    """Stop the server, then remove its memory cgroup (its scripts are all gone by then)."""
    _shutdown_server(process, control)
    for path in cgroups:
        try:
            os.rmdir(path)
        except OSError:
            pass


def _hex_quantities(value: Any) -> Any:
    """JSON-RPC quantities as hex strings: a JavaScript number cannot hold a wei amount exactly."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return hex(value)
    if isinstance(value, dict):
        return {k: _hex_quantities(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_hex_quantities(v) for v in value]
    return value


# ----------------------------------------------------------------------------- server side
def _seccomp_filter(exec_path_address: int) -> Any:
    import errno

    import pyseccomp as sc

    f = sc.SyscallFilter(sc.ALLOW)
    deny = sc.ERRNO(errno.EPERM)
    for name in (
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
        "io_uring_setup",
    ):
        f.add_rule(deny, name)
    # Only the child's own execve of Bun (its path buffer's address) is let through; Bun has no way
    # to name that buffer, and it could not start a process to exec anyway (fork/clone refused).
    f.add_rule(deny, "execve", sc.Arg(0, sc.NE, exec_path_address))
    f.add_rule(deny, "clone", sc.Arg(0, sc.MASKED_EQ, CLONE_THREAD, 0))
    f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    return f


def _bind_file(source: str, root: str, inside: str) -> None:
    target = root + inside
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, "wb"):
        pass
    _libc_mount(os.path.realpath(source), target, None, MS_BIND, None)
    _libc_mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, None)


CLONE_NEWPID = 0x20000000
PR_SET_PDEATHSIG = 1


def _memory_cgroup(limit: int) -> str | None:
    """A memory cgroup (v2 ``memory.max`` or v1 ``memory.limit_in_bytes``) for this server's scripts."""
    name = f"lynn-evmquest-ts-{os.getpid()}"
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


def _oom_count(cgroup: str | None) -> int:
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


def _relay(pid: int, reraise: bool) -> None:
    """Wait for ``pid`` and end with its status (never returns)."""
    code = 4
    try:
        _, status = os.waitpid(pid, 0)
        if os.WIFSIGNALED(status):
            code = 128 + os.WTERMSIG(status)
        elif os.WIFEXITED(status):
            code = os.WEXITSTATUS(status)
        if reraise and code > 128:
            sig = code - 128
            if sig not in (signal.SIGKILL, signal.SIGSTOP):
                signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
    finally:
        os._exit(code)


def _run_child(sock: socket.socket, job: dict[str, Any], scratch: str, config: dict[str, Any]) -> None:
    """In the forked child: contain, then exec Bun on the harness (in a grandchild). Never returns."""
    import ctypes
    import resource

    def fail(message: str) -> None:
        try:
            sock.sendall(json.dumps({"type": "result", "ok": False, "error": message}).encode() + b"\n")
        finally:
            os._exit(3)

    try:
        limits = job["limits"]
        os.setsid()
        if sock.fileno() != 3:
            os.dup2(sock.fileno(), 3)
            sock = socket.socket(fileno=3)
        os.set_inheritable(3, True)
        devnull = os.open("/dev/null", os.O_RDWR)
        for fd in (0, 1) if config.get("debug") else (0, 1, 2):
            os.dup2(devnull, fd)
        os.closerange(4, 65536)
        if config.get("cgroup"):
            with open(os.path.join(config["cgroup"], "cgroup.procs"), "w") as fh:
                fh.write(str(os.getpid()))
        is_root = os.geteuid() == 0
        try:
            _libc_unshare((0 if is_root else CLONE_NEWUSER) | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID)
        except OSError as exc:
            fail(f"sandbox: cannot enter network, mount and PID namespaces ({exc}); script not run")
        _libc_mount(None, "/", None, MS_REC | MS_PRIVATE, None)
        owner = f",uid={NOBODY},gid={NOBODY}" if is_root else ""
        options = f"size={limits['scratch_bytes']},nr_inodes=256,mode=0755{owner}"
        _libc_mount("tmpfs", scratch, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, options)
        _bind_file(config["bun"], scratch, BUN_IN_ROOT)
        _bind_file(config["bundle"], scratch, HARNESS_IN_ROOT)
        if os.path.isfile(config["bundle"] + ".jsc"):
            _bind_file(config["bundle"] + ".jsc", scratch, HARNESS_IN_ROOT + ".jsc")
        for lib in config["libs"]:
            _bind_file(lib, scratch, lib)
        os.makedirs(os.path.join(scratch, "proc"))
        job_path = os.path.join(scratch, "job.json")
        with open(job_path, "w") as fh:
            json.dump({k: job[k] for k in ("source", "agent_address", "contracts")}, fh)
        if is_root:
            os.chown(job_path, NOBODY, NOBODY)
        libc = ctypes.CDLL(None, use_errno=True)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        # Fork twice: the first child is PID 1 (init) of the new PID namespace and only waits, so
        # that Bun (PID 2) gets ordinary signal semantics (init ignores SIGXCPU). Exit statuses are
        # relayed upwards, a signal as 128 + its number.
        pid = os.fork()
        if pid:
            sock.close()
            _relay(pid, reraise=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # the namespace dies with its parent
        _libc_mount("proc", os.path.join(scratch, "proc"), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
        pid = os.fork()
        if pid:
            sock.close()
            _relay(pid, reraise=False)
        os.chroot(scratch)
        os.chdir("/")
        memory = int(limits["memory_bytes"])
        # With a memory cgroup the engine's address-space reservations (~6.3 GB of VmData for Bun's
        # JIT region and gigacage, almost none of it committed) stay out of the way; without one,
        # RLIMIT_DATA is the reservation plus the limit (a weaker bound).
        data = 64 << 30 if config.get("cgroup") else (7 << 30) + memory
        resource.setrlimit(resource.RLIMIT_CPU, (limits["cpu_s"], limits["cpu_s"] + 1))
        resource.setrlimit(resource.RLIMIT_DATA, (data, data))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits["file_bytes"], limits["file_bytes"]))
        resource.setrlimit(resource.RLIMIT_NOFILE, (limits["open_files"], limits["open_files"]))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if is_root:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
        resource.setrlimit(resource.RLIMIT_NPROC, (64, 64))
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # after setuid, which clears it
        args = [BUN_IN_ROOT, "--no-install", HARNESS_IN_ROOT]
        argv = (ctypes.c_char_p * (len(args) + 1))(*[a.encode() for a in args], None)
        env_items = ["HOME=/", "TMPDIR=/", "NO_COLOR=1", "BUN_RUNTIME_TRANSPILER_CACHE_PATH=0"]
        envp = (ctypes.c_char_p * (len(env_items) + 1))(*[e.encode() for e in env_items], None)
        libc.execve.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        _PREPARED["filter"].load()
        libc.execve(ctypes.addressof(_PREPARED["path"]), argv, envp)
        fail(f"sandbox: cannot start bun ({os.strerror(ctypes.get_errno())}); script not run")
    except BaseException as exc:  # containment failed: refuse to run the script
        fail(f"sandbox set-up failed, script not run: {exc}")


_PREPARED: dict[str, Any] = {}


def serve(control_fd: int, config: dict[str, Any]) -> None:
    """Fork-server main loop: one job at a time, one forked (then exec'd) child per job."""
    import ctypes
    import resource  # noqa: F401  (imported once here: children only fork)

    # The exec path buffer and the seccomp filter pinned to its address are made once; every
    # forked child inherits both at the same address.
    _PREPARED["path"] = ctypes.create_string_buffer(BUN_IN_ROOT.encode())
    _PREPARED["filter"] = _seccomp_filter(ctypes.addressof(_PREPARED["path"]))

    control = socket.socket(fileno=control_fd)
    config["cgroup"] = _memory_cgroup(int(config["memory_bytes"]))
    isolation = {
        "root": os.geteuid() == 0,
        "runner": "bun",
        "memory": "cgroup" if config["cgroup"] else "rlimit",
    }
    _send_msg(control, {"ready": True, "isolation": isolation, "cgroup": config["cgroup"]})
    base = tempfile.mkdtemp(prefix="lynn-evmquest-ts-")
    try:
        while True:
            try:
                job, fds = _recv_msg(control, with_fds=True)
            except (EOFError, OSError):
                return
            sock = socket.socket(fileno=fds[0])
            scratch = tempfile.mkdtemp(dir=base)
            pid = os.fork()
            if pid == 0:
                control.close()
                _run_child(sock, job, scratch, config)
            sock.close()
            _send_msg(control, {"pid": pid})
            ooms = _oom_count(config["cgroup"])
            _, status = os.waitpid(pid, 0)
            if os.WIFSIGNALED(status):
                sig = os.WTERMSIG(status)
                text = f"killed by {signal.Signals(sig).name}"
                if sig == signal.SIGXCPU:
                    text += " (CPU time limit)"
                elif _oom_count(config["cgroup"]) > ooms:
                    text += f" (memory limit of {int(config['memory_bytes']) >> 20} MiB)"
            else:
                text = f"exit code {os.WEXITSTATUS(status)}"
            shutil.rmtree(scratch, ignore_errors=True)
            _send_msg(control, {"status": text})
    finally:
        shutil.rmtree(base, ignore_errors=True)
        if config["cgroup"]:
            try:
                os.rmdir(config["cgroup"])
            except OSError:
                pass


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    serve(int(sys.argv[1]), json.loads(sys.argv[2]))


# ----------------------------------------------------------------------------- TypeScript oracle
# Table-driven: each atomic task is one row — the contract's role, the ABI functions it needs (taken
# from the same artifacts as the Python oracle), TypeScript statements reading the chain, and the
# returned expression — rendered from the task instance's own params and the env's display names.
TsPart = Callable[[dict[str, Any], dict[str, str]], str]


@dataclass(frozen=True)
class TsRow:
    """One atomic task of the TypeScript oracle."""

    result: TsPart
    role: Callable[[dict[str, Any]], str] | None = None
    functions: tuple[str, ...] = ()
    pre: TsPart = lambda p, n: ""


def ts_str(value: Any) -> str:
    """A TypeScript string literal."""
    return json.dumps(str(value))


def ts_ether(amount: Any) -> str:
    return f"ethers.parseEther({ts_str(amount)})"


def ts_share(expr: str, percent: Any) -> str:
    """``percent``% of the bigint ``expr`` in integer arithmetic."""
    frac = Fraction(Decimal(str(percent))) / 100
    return f"({expr} * {frac.numerator}n) / {frac.denominator}n"


def ts_contract(n: dict[str, str], role: str) -> str:
    return f"deployedContracts[{ts_str(n[role])}]"


def _encode(fn: str, *args: str) -> str:
    return f"contract.interface.encodeFunctionData({ts_str(fn)}, [{', '.join(args)}])"


def _tx(fn: str, *args: str, value: str = "0n") -> TsPart:
    return lambda p, n: f"{{ to: await contract.getAddress(), data: {_encode(fn, *args)}, value: {value} }}"


def _role(key: str, default: str | None = None) -> Callable[[dict[str, Any]], str]:
    return lambda p: str(p.get(key, default)) if default is not None else str(p[key])


def _fixed(role: str) -> Callable[[dict[str, Any]], str]:
    return lambda p: role


def _native(to: TsPart, value: TsPart, data: TsPart = lambda p, n: '"0x"', extra: str = "") -> TsPart:
    return lambda p, n: f"{{ to: {to(p, n)}, value: {value(p, n)}, data: {data(p, n)}{extra} }}"


_RECIPIENT: TsPart = lambda p, n: ts_str(p["recipient"])  # noqa: E731
_ALLOWANCE_PRE: TsPart = lambda p, n: (  # noqa: E731
    f"const current: bigint = await contract.allowance(agentAddress, {ts_str(p['spender'])});"
)

_DEADLINE = 'const deadline = BigInt((await provider.getBlock("latest"))!.timestamp) + 600n;'


def _swap_pre(p: dict[str, Any], n: dict[str, str], quote_fn: str) -> str:
    pick = "[0]" if quote_fn == "getAmountsIn" else ".at(-1)"
    return (
        f"const amount = {ts_ether(p['amount'])};\n"
        f"const path = [{', '.join(ts_contract(n, str(r)) for r in p['path'])}];\n"
        f"{_DEADLINE}\n"
        f"const quote: bigint = (await contract.{quote_fn}(amount, path)){pick};"
    )


def _remove_pre(p: dict[str, Any], n: dict[str, str]) -> str:
    return (
        f"const pair = new ethers.Contract({ts_contract(n, p['pair'])}, "
        '["function balanceOf(address) view returns (uint256)"], provider);\n'
        f"const liquidity = {ts_share('(await pair.balanceOf(agentAddress))', p['percent'])};\n" + _DEADLINE
    )


TS_ROWS: dict[str, TsRow] = {
    # --- native coin
    "bnb_transfer_basic": TsRow(_native(_RECIPIENT, lambda p, n: ts_ether(p["amount"]))),
    "bnb_transfer_percentage": TsRow(
        _native(_RECIPIENT, lambda p, n: ts_share("balance", p["percent"])),
        pre=lambda p, n: "const balance = await provider.getBalance(agentAddress);",
    ),
    "bnb_transfer_max_amount": TsRow(
        lambda p, n: (
            f'{{ to: {ts_str(p["recipient"])}, value: balance - 21000n * feeCap, data: "0x", gasLimit: 21000n, '
            'maxFeePerGas: feeCap, maxPriorityFeePerGas: ethers.parseUnits("1", "gwei") }'
        ),
        pre=lambda p, n: (
            "const balance = await provider.getBalance(agentAddress);\n"
            'const block = await provider.getBlock("latest");\n'
            'const feeCap = 2n * (block?.baseFeePerGas ?? 0n) + ethers.parseUnits("1", "gwei");'
        ),
    ),
    "bnb_transfer_to_contract": TsRow(
        _native(lambda p, n: ts_contract(n, "fallback"), lambda p, n: ts_ether(p["amount"]))
    ),
    "bnb_transfer_with_message": TsRow(
        _native(
            _RECIPIENT,
            lambda p, n: ts_ether(p["amount"]),
            lambda p, n: f"ethers.hexlify(ethers.toUtf8Bytes({ts_str(p['message'])}))",
        )
    ),
    # --- wrapped coin
    "wbnb_deposit": TsRow(
        lambda p, n: _tx("deposit", value=ts_ether(p["amount"]))(p, n), _fixed("wrapped"), ("deposit",)
    ),
    "wbnb_withdraw": TsRow(
        lambda p, n: _tx("withdraw", ts_ether(p["amount"]))(p, n), _fixed("wrapped"), ("withdraw",)
    ),
    # --- ERC-20
    "erc20_transfer_fixed": TsRow(
        lambda p, n: _tx("transfer", ts_str(p["recipient"]), ts_ether(p["amount"]))(p, n),
        _role("token", "stable"),
        ("transfer",),
    ),
    "erc20_transfer_percentage": TsRow(
        lambda p, n: _tx("transfer", ts_str(p["recipient"]), ts_share("balance", p["percent"]))(p, n),
        _role("token", "stable"),
        ("transfer", "balanceOf"),
        lambda p, n: "const balance: bigint = await contract.balanceOf(agentAddress);",
    ),
    "erc20_transfer_max_amount": TsRow(
        lambda p, n: _tx("transfer", ts_str(p["recipient"]), "balance")(p, n),
        _role("token", "stable"),
        ("transfer", "balanceOf"),
        lambda p, n: "const balance: bigint = await contract.balanceOf(agentAddress);",
    ),
    "erc20_transferfrom_basic": TsRow(
        lambda p, n: _tx("transferFrom", ts_str(p["owner"]), ts_str(p["recipient"]), ts_ether(p["amount"]))(
            p, n
        ),
        _role("token", "stable"),
        ("transferFrom",),
    ),
    "erc20_approve": TsRow(
        lambda p, n: _tx("approve", ts_str(p["spender"]), ts_ether(p["amount"]))(p, n),
        _role("token", "stable"),
        ("approve",),
    ),
    "erc20_increase_allowance": TsRow(
        lambda p, n: _tx("approve", ts_str(p["spender"]), f"current + {ts_ether(p['amount'])}")(p, n),
        _role("token", "stable"),
        ("approve", "allowance"),
        _ALLOWANCE_PRE,
    ),
    "erc20_decrease_allowance": TsRow(
        lambda p, n: _tx("approve", ts_str(p["spender"]), f"current - {ts_ether(p['amount'])}")(p, n),
        _role("token", "stable"),
        ("approve", "allowance"),
        _ALLOWANCE_PRE,
    ),
    "erc20_revoke_approval": TsRow(
        lambda p, n: _tx("approve", ts_str(p["spender"]), "0n")(p, n), _role("token", "stable"), ("approve",)
    ),
    "erc20_burn": TsRow(
        lambda p, n: _tx("burn", ts_ether(p["amount"]))(p, n), _role("token", "stable"), ("burn",)
    ),
    "erc20_approve_and_call_1363": TsRow(
        lambda p, n: _tx(
            "approveAndCall(address,uint256)", ts_contract(n, "receiver1363"), ts_ether(p["amount"])
        )(p, n),
        _fixed("pay1363"),
        ("approveAndCall",),
    ),
    "erc20_transfer_with_callback_1363": TsRow(
        lambda p, n: _tx(
            "transferAndCall(address,uint256)", ts_contract(n, "receiver1363"), ts_ether(p["amount"])
        )(p, n),
        _fixed("pay1363"),
        ("transferAndCall",),
    ),
    # --- ERC-2612 permit: the env signs typed data for the agent (eth_signTypedData_v4 through the proxy)
    "erc20_permit": TsRow(
        lambda p, n: (
            "{ to: await contract.getAddress(), data: "
            + _encode(
                "permit", "agentAddress", ts_str(p["spender"]), "value", "deadline", "sig.v", "sig.r", "sig.s"
            )
            + ", value: 0n }"
        ),
        _role("token", "stable"),
        ("permit", "name", "nonces"),
        lambda p, n: (
            f"const value = {ts_ether(p['amount'])};\n"
            'const deadline = BigInt((await provider.getBlock("latest"))!.timestamp) + 3600n;\n'
            "const typed = {\n"
            "  types: {\n"
            "    EIP712Domain: [\n"
            '      { name: "name", type: "string" }, { name: "version", type: "string" },\n'
            '      { name: "chainId", type: "uint256" }, { name: "verifyingContract", type: "address" },\n'
            "    ],\n"
            "    Permit: [\n"
            '      { name: "owner", type: "address" }, { name: "spender", type: "address" },\n'
            '      { name: "value", type: "uint256" }, { name: "nonce", type: "uint256" },\n'
            '      { name: "deadline", type: "uint256" },\n'
            "    ],\n"
            "  },\n"
            '  primaryType: "Permit",\n'
            "  domain: {\n"
            '    name: await contract.name(), version: "1",\n'
            "    chainId: (await provider.getNetwork()).chainId.toString(), verifyingContract: await contract.getAddress(),\n"
            "  },\n"
            "  message: {\n"
            f"    owner: agentAddress, spender: {ts_str(p['spender'])}, value: value.toString(),\n"
            "    nonce: (await contract.nonces(agentAddress)).toString(), deadline: deadline.toString(),\n"
            "  },\n"
            "};\n"
            'const signature: string = await provider.send("eth_signTypedData_v4", [agentAddress, JSON.stringify(typed)]);\n'
            "const sig = ethers.Signature.from(signature);"
        ),
    ),
    "erc20_flashloan": TsRow(
        lambda p, n: _tx(
            "flashLoan",
            ts_contract(n, "flash_borrower"),
            ts_contract(n, "flash"),
            ts_ether(p["amount"]),
            '"0x"',
        )(p, n),
        _fixed("flash"),
        ("flashLoan",),
    ),
    # --- NFTs
    "erc721_transfer": TsRow(
        lambda p, n: _tx("transferFrom", "agentAddress", ts_str(p["recipient"]), f"{int(p['token_id'])}n")(
            p, n
        ),
        _fixed("nft"),
        ("transferFrom",),
    ),
    "erc721_safe_transfer": TsRow(
        lambda p, n: _tx(
            "safeTransferFrom(address,address,uint256)",
            "agentAddress",
            ts_str(p["recipient"]),
            f"{int(p['token_id'])}n",
        )(p, n),
        _fixed("nft"),
        ("safeTransferFrom",),
    ),
    "erc721_approve": TsRow(
        lambda p, n: _tx("approve", ts_str(p["spender"]), f"{int(p['token_id'])}n")(p, n),
        _fixed("nft"),
        ("approve",),
    ),
    "erc721_set_approval_for_all": TsRow(
        lambda p, n: _tx("setApprovalForAll", ts_str(p["operator"]), "true")(p, n),
        _fixed("nft"),
        ("setApprovalForAll",),
    ),
    "erc1155_transfer_single": TsRow(
        lambda p, n: _tx(
            "safeTransferFrom",
            "agentAddress",
            ts_str(p["recipient"]),
            f"{int(p['item_id'])}n",
            f"{int(p['amount'])}n",
            '"0x"',
        )(p, n),
        _fixed("multi"),
        ("safeTransferFrom",),
    ),
    "erc1155_safe_transfer_with_data": TsRow(
        lambda p, n: _tx(
            "safeTransferFrom",
            "agentAddress",
            ts_str(p["recipient"]),
            f"{int(p['item_id'])}n",
            f"{int(p['amount'])}n",
            f"ethers.toUtf8Bytes({ts_str(p['memo'])})",
        )(p, n),
        _fixed("multi"),
        ("safeTransferFrom",),
    ),
    # --- contract calls
    "contract_call_simple": TsRow(lambda p, n: _tx("increment")(p, n), _fixed("counter"), ("increment",)),
    "contract_call_with_params": TsRow(
        lambda p, n: _tx("postMessage", ts_str(p["message"]))(p, n), _fixed("board"), ("postMessage",)
    ),
    "contract_call_with_value": TsRow(
        lambda p, n: _tx("donate", value=ts_ether(p["amount"]))(p, n), _fixed("donation"), ("donate",)
    ),
    "contract_delegate_call": TsRow(
        lambda p, n: _tx("delegateSetValue", ts_contract(n, "delegate_target"), f"{int(p['value'])}n")(p, n),
        _fixed("delegate_caller"),
        ("delegateSetValue",),
    ),
    "contract_payable_fallback": TsRow(
        _native(
            lambda p, n: ts_contract(n, "fallback"),
            lambda p, n: ts_ether(p["amount"]),
            lambda p, n: ts_str(p["calldata"]),
        )
    ),
    # --- staking
    "stake_single_token": TsRow(
        lambda p, n: _tx("deposit", ts_ether(p["amount"]))(p, n), _role("pool"), ("deposit",)
    ),
    "stake_lp_tokens": TsRow(
        lambda p, n: _tx("deposit", ts_share("lp", p["percent"]))(p, n),
        _role("pool"),
        ("deposit",),
        lambda p, n: (
            f"const lpToken = new ethers.Contract({ts_contract(n, 'pair_wrapped_stable')}, "
            '["function balanceOf(address) view returns (uint256)"], provider);\n'
            "const lp: bigint = await lpToken.balanceOf(agentAddress);"
        ),
    ),
    "unstake_lp_tokens": TsRow(
        lambda p, n: _tx("withdraw", ts_share("staked", p["percent"]))(p, n),
        _role("pool"),
        ("withdraw", "stakedBalance"),
        lambda p, n: "const staked: bigint = await contract.stakedBalance(agentAddress);",
    ),
    "harvest_rewards": TsRow(lambda p, n: _tx("harvest")(p, n), _role("pool"), ("harvest",)),
    "emergency_withdraw": TsRow(
        lambda p, n: _tx("emergencyWithdraw")(p, n), _role("pool"), ("emergencyWithdraw",)
    ),
    # --- DEX: swaps and liquidity (quotes from the router, 1% slippage as the Python oracle)
    "swap_exact_bnb_for_tokens": TsRow(
        lambda p, n: _tx(
            "swapExactETHForTokens", ts_share("quote", 99), "path", "agentAddress", "deadline", value="amount"
        )(p, n),
        _fixed("router"),
        ("swapExactETHForTokens", "getAmountsOut"),
        lambda p, n: _swap_pre(p, n, "getAmountsOut"),
    ),
    "swap_exact_tokens_for_bnb": TsRow(
        lambda p, n: _tx(
            "swapExactTokensForETH", "amount", ts_share("quote", 99), "path", "agentAddress", "deadline"
        )(p, n),
        _fixed("router"),
        ("swapExactTokensForETH", "getAmountsOut"),
        lambda p, n: _swap_pre(p, n, "getAmountsOut"),
    ),
    "swap_exact_tokens_for_tokens": TsRow(
        lambda p, n: _tx(
            "swapExactTokensForTokens", "amount", ts_share("quote", 99), "path", "agentAddress", "deadline"
        )(p, n),
        _fixed("router"),
        ("swapExactTokensForTokens", "getAmountsOut"),
        lambda p, n: _swap_pre(p, n, "getAmountsOut"),
    ),
    "swap_tokens_for_exact_tokens": TsRow(
        lambda p, n: _tx(
            "swapTokensForExactTokens", "amount", ts_share("quote", 101), "path", "agentAddress", "deadline"
        )(p, n),
        _fixed("router"),
        ("swapTokensForExactTokens", "getAmountsIn"),
        lambda p, n: _swap_pre(p, n, "getAmountsIn"),
    ),
    "add_liquidity_bnb_token": TsRow(
        lambda p, n: _tx(
            "addLiquidityETH",
            "path[1]",
            "amountToken",
            "0n",
            ts_share("amountNative", 99),
            "agentAddress",
            "deadline",
            value="amountNative",
        )(p, n),
        _fixed("router"),
        ("addLiquidityETH", "getAmountsOut"),
        lambda p, n: (
            f"const amountNative = {ts_ether(p['amount'])};\n"
            f"const path = [{ts_contract(n, 'wrapped')}, {ts_contract(n, 'stable')}];\n"
            f"const amountToken = {ts_share('(await contract.getAmountsOut(amountNative, path)).at(-1)', 100.5)};\n"
            + _DEADLINE
        ),
    ),
    "add_liquidity_tokens": TsRow(
        lambda p, n: _tx(
            "addLiquidity",
            "path[0]",
            "path[1]",
            "amount",
            "amount",
            ts_share("amount", 98),
            ts_share("amount", 98),
            "agentAddress",
            "deadline",
        )(p, n),
        _fixed("router"),
        ("addLiquidity",),
        lambda p, n: (
            f"const amount = {ts_ether(p['amount'])};\n"
            f"const path = [{ts_contract(n, 'stable')}, {ts_contract(n, 'stable2')}];\n" + _DEADLINE
        ),
    ),
    "remove_liquidity_bnb_token": TsRow(
        lambda p, n: _tx(
            "removeLiquidityETH",
            ts_contract(n, "stable"),
            "liquidity",
            "0n",
            "0n",
            "agentAddress",
            "deadline",
        )(p, n),
        _fixed("router"),
        ("removeLiquidityETH",),
        lambda p, n: _remove_pre(p, n),
    ),
    "remove_liquidity_tokens": TsRow(
        lambda p, n: _tx(
            "removeLiquidity",
            ts_contract(n, "stable"),
            ts_contract(n, "stable2"),
            "liquidity",
            "0n",
            "0n",
            "agentAddress",
            "deadline",
        )(p, n),
        _fixed("router"),
        ("removeLiquidity",),
        lambda p, n: _remove_pre(p, n),
    ),
    # --- queries
    "query_bnb_balance": TsRow(
        lambda p, n: f"{{ query_result: await provider.getBalance({ts_str(p['account'])}) }}"
    ),
    "query_current_block_number": TsRow(lambda p, n: "{ query_result: await provider.getBlockNumber() }"),
    "query_gas_price": TsRow(lambda p, n: "{ query_result: (await provider.getFeeData()).gasPrice }"),
    "query_transaction_count_nonce": TsRow(
        lambda p, n: f"{{ query_result: await provider.getTransactionCount({ts_str(p['account'])}) }}"
    ),
    "query_erc20_balance": TsRow(
        lambda p, n: f"{{ query_result: await contract.balanceOf({ts_str(p['account'])}) }}",
        _role("token", "stable"),
        ("balanceOf",),
    ),
    "query_erc20_allowance": TsRow(
        lambda p, n: f"{{ query_result: await contract.allowance({ts_str(p['owner'])}, agentAddress) }}",
        _role("token", "stable"),
        ("allowance",),
    ),
    "query_token_total_supply": TsRow(
        lambda p, n: "{ query_result: await contract.totalSupply() }",
        _role("token", "stable"),
        ("totalSupply",),
    ),
    "query_token_metadata": TsRow(
        lambda p, n: (
            "{ query_result: { name: await contract.name(), symbol: await contract.symbol(), "
            "decimals: await contract.decimals() } }"
        ),
        _role("token", "stable"),
        ("name", "symbol", "decimals"),
    ),
    "query_nft_balance": TsRow(
        lambda p, n: f"{{ query_result: await contract.balanceOf({ts_str(p['account'])}) }}",
        _fixed("nft"),
        ("balanceOf",),
    ),
    "query_nft_owner": TsRow(
        lambda p, n: f"{{ query_result: await contract.ownerOf({int(p['token_id'])}n) }}",
        _fixed("nft"),
        ("ownerOf",),
    ),
    "query_nft_token_uri": TsRow(
        lambda p, n: f"{{ query_result: await contract.tokenURI({int(p['token_id'])}n) }}",
        _fixed("nft"),
        ("tokenURI",),
    ),
    "query_nft_approval_status": TsRow(
        lambda p, n: f"{{ query_result: await contract.getApproved({int(p['token_id'])}n) }}",
        _fixed("nft"),
        ("getApproved",),
    ),
    "query_pair_reserves": TsRow(
        lambda p, n: "{ query_result: { reserve0: reserves[0], reserve1: reserves[1] } }",
        _role("pair"),
        ("getReserves",),
        lambda p, n: "const reserves = await contract.getReserves();",
    ),
    "query_pending_rewards": TsRow(
        lambda p, n: "{ query_result: await contract.pendingReward(agentAddress) }",
        _role("pool"),
        ("pendingReward",),
    ),
    "query_staked_amount": TsRow(
        lambda p, n: "{ query_result: await contract.stakedBalance(agentAddress) }",
        _role("pool"),
        ("stakedBalance",),
    ),
    "query_swap_output_amount": TsRow(
        lambda p, n: (
            f"{{ query_result: (await contract.getAmountsOut({ts_ether(p['amount'])}, path)).at(-1) }}"
        ),
        _fixed("router"),
        ("getAmountsOut",),
        lambda p, n: f"const path = [{', '.join(ts_contract(n, r) for r in p['path'])}];",
    ),
    "query_swap_input_amount": TsRow(
        lambda p, n: f"{{ query_result: (await contract.getAmountsIn({ts_ether(p['amount'])}, path))[0] }}",
        _fixed("router"),
        ("getAmountsIn",),
        lambda p, n: f"const path = [{', '.join(ts_contract(n, r) for r in p['path'])}];",
    ),
}

TS_ROWS["swap_multihop_routing"] = TS_ROWS["swap_exact_tokens_for_tokens"]  # the path param has the hop


# Rows used only as composite steps: an unlimited approval of a contract (by role) as spender.
STEP_ROWS: dict[str, TsRow] = {
    "approve_contract": TsRow(
        lambda p, n: _tx("approve", ts_contract(n, p["spender_role"]), "ethers.MaxUint256")(p, n),
        _role("token"),
        ("approve",),
    ),
}

Plan = Callable[[dict[str, Any]], list[tuple[str, dict[str, Any]]]]


def _transfers(kind: str, k: int) -> Plan:
    task = "bnb_transfer_basic" if kind == "bnb" else "erc20_transfer_fixed"

    def plan(p: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        return [
            (task, {"token": p.get("token", "stable"), "recipient": p[f"r{i}"], "amount": p[f"amount{i}"]})
            for i in range(1, k + 1)
        ]

    return plan


def _approve_then(swap: str) -> Plan:
    return lambda p: [
        ("approve_contract", {"token": str(p["path"][0]), "spender_role": "router"}),
        (swap, {"amount": p["amount"], "path": p["path"]}),
    ]


# Composite tasks as sequences of the table's rows (atomic tasks and STEP_ROWS), each step's params
# taken from the composite's own; the same plan as the Python oracle's steps.
TS_COMPOSITES: dict[str, Plan] = {
    "composite_batch_transfer_2_bnb": _transfers("bnb", 2),
    "composite_batch_transfer_3_bnb": _transfers("bnb", 3),
    "composite_batch_transfer_2_tokens": _transfers("token", 2),
    "composite_batch_transfer_3_tokens": _transfers("token", 3),
    "composite_batch_mixed_transfers": lambda p: [
        ("bnb_transfer_basic", {"recipient": p["r1"], "amount": p["amount1"]}),
        ("erc20_transfer_fixed", {"token": "stable", "recipient": p["r2"], "amount": p["amount2"]}),
    ],
    "composite_batch_approve_2_tokens": lambda p: [
        ("erc20_approve", {"token": "stable", "spender": p["spender"], "amount": p["amount1"]}),
        ("erc20_approve", {"token": "gov", "spender": p["spender"], "amount": p["amount2"]}),
    ],
    "composite_wrap_unwrap_cycle": lambda p: [
        ("wbnb_deposit", {"amount": p["amount"]}),
        ("wbnb_withdraw", {"amount": p["amount"]}),
    ],
    "composite_approve_swap_tokens": _approve_then("swap_exact_tokens_for_tokens"),
    "composite_approve_swap_to_bnb": _approve_then("swap_exact_tokens_for_bnb"),
    "composite_approve_stake_tokens": lambda p: [
        ("approve_contract", {"token": "gov", "spender_role": "staking_pool"}),
        ("stake_single_token", {"amount": p["amount"], "pool": "staking_pool"}),
    ],
    "composite_approve_transferfrom": lambda p: [
        ("erc20_approve", {"token": "stable", "spender": _agent(), "amount": p["amount"]}),
        ("erc20_transferfrom_basic", {"owner": _agent(), "recipient": p["recipient"], "amount": p["amount"]}),
    ],
    "composite_approve_add_liquidity": lambda p: [
        ("approve_contract", {"token": "stable", "spender_role": "router"}),
        ("approve_contract", {"token": "stable2", "spender_role": "router"}),
        ("add_liquidity_tokens", {"amount": p["amount"], "pair": "pair_stable_stable2"}),
    ],
    "composite_approve_remove_liquidity": lambda p: [
        ("approve_contract", {"token": "pair_wrapped_stable", "spender_role": "router"}),
        ("remove_liquidity_bnb_token", {"percent": p["percent"], "pair": "pair_wrapped_stable"}),
    ],
}


def _agent() -> str:
    from lynn.envs.evmquest.world import AGENT

    return AGENT.address


def ts_composite_scripts(task_id: str, params: dict[str, Any], names: dict[str, str]) -> list[str]:
    """The TypeScript oracle's scripts for one composite instance, one per step.

    Raises:
        KeyError: the composite is not (yet) covered by :data:`TS_COMPOSITES`.
    """
    if task_id not in TS_COMPOSITES:
        raise KeyError(
            f"the TypeScript oracle does not cover {task_id!r} yet ({len(TS_COMPOSITES)} of 45 composites do)"
        )
    return [
        ts_oracle_script(step, step_params, names) for step, step_params in TS_COMPOSITES[task_id](params)
    ]


def ts_oracle_covers(task_id: str) -> bool:
    """Whether the TypeScript oracle has a script for ``task_id`` (atomic or composite)."""
    return task_id in TS_ROWS or task_id in TS_COMPOSITES


def ts_oracle_script(task_id: str, params: dict[str, Any], names: dict[str, str]) -> str:
    """The TypeScript oracle's script for one atomic task instance.

    Raises:
        KeyError: the task is not (yet) covered by :data:`TS_ROWS`.
    """
    from lynn.envs.evmquest.taskkit import abi_json
    from lynn.envs.evmquest.world import ROLE_ARTIFACT

    if task_id not in TS_ROWS and task_id not in STEP_ROWS:
        raise KeyError(
            f"the TypeScript oracle does not cover {task_id!r} yet ({len(TS_ROWS)} atomic tasks do)"
        )
    row = TS_ROWS.get(task_id) or STEP_ROWS[task_id]
    lines = [
        'import { ethers } from "ethers";',
        "",
    ]
    body = ["const provider = new ethers.JsonRpcProvider(providerUrl);"]
    if row.role is not None:
        role = row.role(params)
        lines.append(f"const ABI = {abi_json(ROLE_ARTIFACT[role], *row.functions)};")
        lines.append("")
        body.append(f"const contract = new ethers.Contract({ts_contract(names, role)}, ABI, provider);")
    pre = row.pre(params, names)
    if pre:
        body += pre.splitlines()
    body.append(f"return {row.result(params, names)};")
    lines += [
        "export async function executeSkill(",
        "  providerUrl: string,",
        "  agentAddress: string,",
        "  deployedContracts: Record<string, string>,",
        "): Promise<Record<string, unknown>> {",
        *[f"  {line}" for line in body],
        "}",
        "",
    ]
    return "\n".join(lines)
