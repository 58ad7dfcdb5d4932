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

Containment (:class:`TypeScriptSandbox`, the layer of :mod:`lynn.envs.evmquest.containment` shared with Python):
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
(:meth:`~lynn.envs.evmquest.containment.ScriptSandbox._serve` answers it): the harness routes ethers' ``FetchRequest`` and ``fetch``
for ``providerUrl`` to it and refuses every other URL. ``LYNN_TS_DEBUG=1`` lets Bun's own stderr
(crash reports) through to the env's stderr; ``TypeScriptSandbox.isolation["memory"]`` says whether
the memory bound is a cgroup or the ``RLIMIT_DATA`` fallback.

The TypeScript oracle (its scripts for the task bank) is :mod:`~lynn.envs.evmquest.ts_oracle`.
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lynn.envs.evmquest.containment import (
    CLONE_NEWPID,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    NOBODY,
    SandboxLimits,
    ScriptResult,
    ScriptSandbox,
    bind_file,
    drop_to_nobody,
    enter_namespaces,
    libc_mount,
    memory_cgroup,
    mount_scratch,
    seccomp_filter,
    send_msg,
    serve_jobs,
    set_rlimits,
)

ROOT = Path(__file__).resolve().parents[3]
HARNESS = Path(__file__).with_name("ts") / "harness.ts"
PROVIDER_URL = "http://evmquest-rpc.sandbox/"
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


class TypeScriptSandbox(ScriptSandbox):
    """Runs TypeScript agent scripts under Bun; same interface and results as :class:`~lynn.envs.evmquest.sandbox.Sandbox`.

    Args:
        limits: per-script limits (``memory_bytes`` bounds the writable memory, ``RLIMIT_DATA``:
            JavaScript engines reserve far more address space than they use).
        shared: share the fork server with the process's other TypeScript sandboxes of the same
            configuration (see :class:`~lynn.envs.evmquest.containment.ScriptSandbox`).
    """

    server_module = "lynn.envs.evmquest.typescript"
    server_name = "TypeScript sandbox server"

    def __init__(self, limits: SandboxLimits | None = None, shared: bool = True) -> None:
        limits = limits or SandboxLimits()
        bun = bun_path()
        bundle = harness_bundle(bun)
        config = {
            "bun": str(bun),
            "bundle": str(bundle),
            "libs": shared_libraries(bun),
            "memory_bytes": limits.memory_bytes,
            "debug": bool(os.environ.get("LYNN_TS_DEBUG")),  # Bun's stderr reaches the env's stderr
        }
        super().__init__(limits, config=[json.dumps(config)], stderr=config["debug"], shared=shared)

    def _answer(
        self, msg: dict[str, Any], result: ScriptResult, handle_rpc: Callable[[str, list[Any]], Any]
    ) -> dict[str, Any]:
        reply = super()._answer(msg, result, handle_rpc)
        if "result" in reply:
            reply["result"] = _hex_quantities(reply["result"])
        return reply


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
PR_SET_PDEATHSIG = 1


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
        try:
            enter_namespaces(CLONE_NEWPID)
        except OSError as exc:
            fail(f"sandbox: cannot enter network, mount and PID namespaces ({exc}); script not run")
        mount_scratch(scratch, limits, mode="0755")
        bind_file(config["bun"], scratch, BUN_IN_ROOT)
        bind_file(config["bundle"], scratch, HARNESS_IN_ROOT)
        if os.path.isfile(config["bundle"] + ".jsc"):
            bind_file(config["bundle"] + ".jsc", scratch, HARNESS_IN_ROOT + ".jsc")
        for lib in config["libs"]:
            bind_file(lib, scratch, lib)
        os.makedirs(os.path.join(scratch, "proc"))
        job_path = os.path.join(scratch, "job.json")
        with open(job_path, "w") as fh:
            json.dump({k: job[k] for k in ("source", "agent_address", "contracts")}, fh)
        if os.geteuid() == 0:
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
        libc_mount("proc", os.path.join(scratch, "proc"), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
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
        set_rlimits(limits, memory=(resource.RLIMIT_DATA, data))
        drop_to_nobody()
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
    _PREPARED["filter"] = seccomp_filter(ctypes.addressof(_PREPARED["path"]), extra=("io_uring_setup",))

    control = socket.socket(fileno=control_fd)
    config["cgroup"] = memory_cgroup(int(config["memory_bytes"]), f"lynn-evmquest-ts-{os.getpid()}")
    isolation = {
        "root": os.geteuid() == 0,
        "runner": "bun",
        "memory": "cgroup" if config["cgroup"] else "rlimit",
    }
    send_msg(control, {"ready": True, "isolation": isolation, "cgroup": config["cgroup"]})
    try:
        serve_jobs(
            control,
            lambda sock, job, scratch: _run_child(sock, job, scratch, config),
            prefix="lynn-evmquest-ts-",
            cgroup=config["cgroup"],
            memory_bytes=int(config["memory_bytes"]),
        )
    finally:
        if config["cgroup"]:
            try:
                os.rmdir(config["cgroup"])
            except OSError:
                pass


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    serve(int(sys.argv[1]), json.loads(sys.argv[2]))
