"""Lynn agents as workers of the real coordination pool (``scenario="real-pool"``).

Each :class:`ProcessWorker` runs one agent in its own process (a fresh ``python -m lynn.agents.workers``, or
a ``multiprocessing`` process of a chosen start method, e.g. a fork server that imported torch once), with its
own ``Lynn/EVMQuest-v0`` env (embedded chain, script sandbox) and, on its first LiveWeb instance, its
own ``Lynn/LiveWeb-v0`` env (its own Chromium and site servers), so that killing the process is a real
fault: the pool's heartbeat sees it and routes around it. One call runs one task instance to its end
and answers an :class:`~lynn.envs.coordination.workers_protocol.Outcome` (the task validator's
verdict, the wall time of act + step, the generated tokens, the cost).

Kinds:

* ``lm``: :class:`lynn.agents.llm.LMPolicy` over a local model (the in-repo target, its draft
  alone, the target with MARS speculative verification, a high-temperature sampler).
* ``openai``: ``LMPolicy`` over any OpenAI-compatible endpoint (``llm_url``, ``model``).
* ``oracle``: :class:`lynn.agents.evmquest_oracle.EVMQuestOracle` (on LiveWeb instances the
  LiveWeb expert, :class:`lynn.agents.web_expert.WebExpert`) behind an injected failure rate: with
  probability ``failure_rate`` (drawn from the execution seed and the instance) it submits a script
  that raises (EVMQuest, on every attempt) or answers ``send_msg_to_user("injected worker failure")``
  at once (LiveWeb); the env runs it and the task's validator fails it.

On LiveWeb instances an ``lm`` worker runs ``LMPolicy`` with its ``lm`` settings updated by
``web_lm`` (e.g. the LiveWeb model instead of the EVMQuest one); its cache key for LiveWeb instances
covers those settings (:meth:`WorkerSpec.key_for`), its EVMQuest key stays what it was.

Prices (cost units per generated token / per call) are the worker's documented card:
:data:`PRICES`. The pool factory is :func:`evmquest_pool`.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from weakref import WeakSet

from lynn.envs.coordination.workers_protocol import Outcome, TaskRef, WorkerDied

EVMQUEST = "Lynn/EVMQuest-v0"
LIVEWEB = "Lynn/LiveWeb-v0"
#: What the failure-injected LiveWeb expert answers: a wrong final message, which no task accepts.
BROKEN_WEB_ACTION = 'send_msg_to_user("injected worker failure")'

#: Cost per generated token and per call, by worker kind; an in-repo model's price is its size class
#: (the target is ~8.7x the draft's parameters), the oracle stands for an expensive hosted model.
PRICES: dict[str, tuple[float, float]] = {
    "lm-target": (0.0010, 0.0),
    "lm-draft": (0.00012, 0.0),
    "lm-mars": (0.0010, 0.0),
    "lm-sampler": (0.0010, 0.0),
    "oracle": (0.0, 1.0),
    "openai": (0.0010, 0.0),
}

BROKEN_SCRIPT = (
    "def execute_skill(w3, agent_address, contracts):\n    raise RuntimeError('injected worker failure')\n"
)


@dataclass
class WorkerSpec:
    """What one worker process runs.

    Attributes:
        name: the worker's name in the pool.
        kind: ``lm``, ``openai`` or ``oracle``.
        price_per_token: cost of one generated token.
        price_per_call: cost of one execution.
        lm: keyword arguments of ``LMPolicy`` (``model``, ``temperature``, ``speculative``, ...).
        failure_rate: the oracle's injected failure probability.
        threads: torch threads in the process.
        web_lm: ``LMPolicy`` settings that replace ``lm``'s on LiveWeb instances (``{}``: the same).
    """

    name: str
    kind: str
    price_per_token: float = 0.0
    price_per_call: float = 0.0
    lm: dict[str, Any] = field(default_factory=dict)
    failure_rate: float = 0.0
    threads: int = 1
    web_lm: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in ("lm", "openai", "oracle"):
            raise ValueError(f"worker {self.name}: kind must be lm, openai or oracle, got {self.kind!r}")
        if not 0.0 <= self.failure_rate <= 1.0:
            raise ValueError(f"worker {self.name}: failure_rate must lie in [0, 1]")
        if self.kind == "lm":
            for key, path in [*self.lm.items(), *self.web_lm.items()]:
                if key not in ("model", "draft") or path is None:
                    continue
                if not Path(path).exists():
                    raise ValueError(
                        f"worker {self.name}: {key} {path!r} does not exist (train one with `lynn train lm`)"
                    )

    def key(self) -> str:
        """Identity of what runs (the cache key): kind, model files, settings, failure rate."""
        body = {"kind": self.kind, "lm": self.lm, "failure_rate": self.failure_rate}
        for k in ("model", "draft"):
            path = self.lm.get(k)
            if path is not None and Path(path).exists():
                body[f"{k}_abs"] = str(Path(path).resolve())
        digest = hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()[:12]
        return f"{self.kind}:{digest}"

    def web_settings(self) -> dict[str, Any]:
        """The ``LMPolicy`` settings on LiveWeb: ``lm`` updated by ``web_lm``, without EVMQuest's budget."""
        out = {k: v for k, v in self.lm.items() if k != "max_new_tokens"}
        out.update(self.web_lm)
        return out

    def key_for(self, env_id: str) -> str:
        """The cache key for an instance of ``env_id``: :meth:`key` on EVMQuest; on LiveWeb, one that
        covers the LiveWeb settings (the same worker runs other settings there)."""
        if env_id == EVMQUEST or self.kind == "oracle":
            return self.key() if env_id == EVMQUEST else f"{self.key()}@{env_id}"
        settings = self.web_settings()
        body = {"kind": self.kind, "lm": settings, "env": env_id}
        for k in ("model", "draft"):
            path = settings.get(k)
            if path is not None and Path(path).exists():
                body[f"{k}_abs"] = str(Path(path).resolve())
        digest = hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()[:12]
        return f"{self.kind}:{digest}"

    @property
    def deterministic(self) -> bool:
        if self.kind == "oracle":
            return self.failure_rate in (0.0, 1.0)
        return float(self.lm.get("temperature", 0.0)) == 0.0


# --- the child process ------------------------------------------------------------------------
class _Executor:
    """Inside the worker process: the env and the agent, built on the first call."""

    def __init__(self, spec: WorkerSpec) -> None:
        self.spec = spec
        self.envs: dict[str, Any] = {}
        self.agents: dict[str, Any] = {}

    def _build(self, env_id: str) -> None:
        import gymnasium as gym

        import lynn  # noqa: F401  (registers the ids)

        os.environ.setdefault("LYNN_TORCH_THREADS", str(self.spec.threads))
        if env_id == EVMQUEST:
            env = gym.make(EVMQUEST, split="atomic", action_mode="script")
        elif env_id == LIVEWEB:
            env = gym.make(LIVEWEB, split="test")  # its own site servers and Chromium, in this process
        else:
            raise ValueError(f"worker {self.spec.name}: no support for {env_id!r} (EVMQuest, LiveWeb)")
        if self.spec.kind == "oracle" and env_id == EVMQUEST:
            from lynn.agents.evmquest_oracle import EVMQuestOracle

            agent: Any = EVMQuestOracle(env)
        elif self.spec.kind == "oracle":
            from lynn.agents.web_expert import WebExpert

            agent = WebExpert(env)
        else:
            from lynn.agents.llm import LMPolicy

            kwargs = dict(self.spec.lm) if env_id == EVMQUEST else self.spec.web_settings()
            if self.spec.kind == "lm":
                kwargs.setdefault("threads", self.spec.threads)
            agent = LMPolicy(env, **kwargs)
        self.envs[env_id], self.agents[env_id] = env, agent

    def run(self, task: TaskRef, seed: int) -> Outcome:
        import numpy as np

        if task.env_id not in self.envs:
            self._build(task.env_id)
        env, agent = self.envs[task.env_id], self.agents[task.env_id]
        obs, info = env.reset(seed=task.seed, options={"task_id": task.task_id})
        agent.reset(seed=seed)
        fail = False
        if self.spec.kind == "oracle" and self.spec.failure_rate > 0:
            h = int(hashlib.sha256(task.key().encode()).hexdigest()[:8], 16)
            fail = bool(np.random.default_rng([seed, h]).random() < self.spec.failure_rate)
        broken = BROKEN_SCRIPT if task.env_id == EVMQUEST else BROKEN_WEB_ACTION
        tokens0 = getattr(agent, "completion_tokens", 0)
        start = time.perf_counter()
        done, reward, step_info = False, 0.0, {}
        while not done:
            action = broken if fail else agent.act(obs, info)
            obs, reward, terminated, truncated, step_info = env.step(action)
            done = terminated or truncated
            info = step_info
        latency = time.perf_counter() - start
        tokens = int(getattr(agent, "completion_tokens", 0) - tokens0)
        cost = tokens * self.spec.price_per_token + self.spec.price_per_call
        return Outcome(
            success=bool(step_info.get("success", False)),
            latency_s=latency,
            tokens=tokens,
            cost=cost,
            score=float(reward),
        )

    def close(self) -> None:
        for agent in self.agents.values():
            if hasattr(agent, "close"):
                agent.close()
        for env in self.envs.values():
            env.close()


def _answer(executor: _Executor, line: str) -> str | None:
    """One request line ``{"task", "seed"}`` -> its answer line ``{"ok"|"error": ...}``; ``None`` on ``close``."""
    msg = json.loads(line)
    if msg.get("close"):
        return None
    reply: dict[str, Any]
    try:
        reply = {"ok": asdict(executor.run(TaskRef(**msg["task"]), int(msg["seed"])))}
    except Exception as exc:  # the env or the agent broke: report it, keep serving
        reply = {"error": f"{type(exc).__name__}: {exc}"}
    return json.dumps(reply) + "\n"


def _serve(spec: WorkerSpec) -> None:
    """The worker process's loop over JSON lines: stdin ``{"task", "seed"}`` -> ``{"ok"|"error": ...}``.

    Answers go to the process's original stdout; anything a library prints goes to stderr instead.
    """
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    executor = _Executor(spec)
    try:
        for line in sys.stdin:
            reply = _answer(executor, line)
            if reply is None:
                break
            out.write(reply)
    finally:
        executor.close()


def _serve_conn(spec: WorkerSpec, conn: Any, environ: dict[str, str], cwd: str) -> None:
    """:func:`_serve` in a ``multiprocessing`` child: the same lines over ``conn`` (a ``Pipe`` end).

    The parent's environment and folder at the start replace those a fork server inherited when it began,
    as a fresh process would have them (relative model paths, ``$LYNN_ZOO``); output goes to /dev/null, as
    the subprocess worker's stderr does. The parent's end closing (the parent died) ends the loop like
    stdin's EOF."""
    os.environ.clear()
    os.environ.update(environ)
    os.chdir(cwd)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    executor = _Executor(spec)
    try:
        while True:
            try:
                line = conn.recv_bytes().decode()
            except EOFError:
                break
            reply = _answer(executor, line)
            if reply is None:
                break
            conn.send_bytes(reply.encode())
    finally:
        executor.close()


class _ChildProcess:
    """What :class:`ProcessWorker` (and a caller killing it) uses of ``subprocess.Popen`` (``pid``, ``poll``,
    ``wait``, ``kill``), for a ``multiprocessing.Process`` and its end of the request pipe."""

    def __init__(self, process: Any, conn: Any) -> None:
        self.process, self.conn = process, conn
        self.pid: int = process.pid

    def poll(self) -> int | None:
        return self.process.exitcode

    def wait(self, timeout: float | None = None) -> int:
        self.process.join(timeout)
        code = self.process.exitcode
        if code is None:
            raise subprocess.TimeoutExpired(f"worker process {self.pid}", timeout or 0.0)
        return code

    def kill(self) -> None:
        self.process.kill()


def _send(proc: subprocess.Popen[str] | _ChildProcess, msg: dict[str, Any]) -> None:
    """Write one request line to a worker process."""
    line = json.dumps(msg) + "\n"
    if isinstance(proc, _ChildProcess):
        proc.conn.send_bytes(line.encode())
        return
    assert proc.stdin is not None
    proc.stdin.write(line)
    proc.stdin.flush()


def _receive(proc: subprocess.Popen[str] | _ChildProcess, timeout: float) -> str | None:
    """A worker process's next answer line; ``""`` when the process is gone, ``None`` after ``timeout`` s."""
    if isinstance(proc, _ChildProcess):
        if not proc.conn.poll(timeout):
            return None
        try:
            return proc.conn.recv_bytes().decode()
        except EOFError:
            return ""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    return proc.stdout.readline() if ready else None


#: Workers with a live ``multiprocessing`` child, closed at exit: multiprocessing joins its non-daemon
#: children at exit, and a worker waiting on its open pipe would never end (a subprocess worker sees EOF).
_FORKED: WeakSet[ProcessWorker] = WeakSet()
_AT_EXIT: list[bool] = []


def _close_forked() -> None:
    for w in list(_FORKED):
        w.close()


# --- the parent's handle ----------------------------------------------------------------------
class ProcessWorker:
    """A worker in its own process (``python -m lynn.agents.workers``, started on its first call).

    Follows the Worker protocol. Requests and answers are JSON lines over the child's stdin/stdout (or,
    with ``start_method``, over a ``multiprocessing`` pipe).

    Args:
        spec: what the process runs.
        timeout_s: longest wait for one execution before the worker counts as dead (and is killed).
        start_method: ``None`` (default): a fresh interpreter (``python -m lynn.agents.workers``); or a
            ``multiprocessing`` start method, e.g. ``forkserver`` after ``multiprocessing.set_forkserver_preload``
            of torch and transformers, which an LM worker then does not import again (~7.5 CPU-s). Either way
            the worker is a process of its own, killed and detected dead the same way.
    """

    def __init__(self, spec: WorkerSpec, timeout_s: float = 600.0, start_method: str | None = None) -> None:
        self.spec = spec
        self.name = spec.name
        self.key = spec.key()
        self.deterministic = spec.deterministic
        self.timeout_s = timeout_s
        self.start_method = start_method
        self.proc: subprocess.Popen[str] | _ChildProcess | None = None
        self.killed = False
        self.calls = 0

    def key_for(self, task: TaskRef) -> str:
        """The cache key of this worker on ``task`` (see :meth:`WorkerSpec.key_for`)."""
        return self.key if task.env_id == EVMQUEST else self.spec.key_for(task.env_id)

    @property
    def started(self) -> bool:
        return self.proc is not None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def _start(self) -> None:
        environ = {**os.environ, "LYNN_TORCH_THREADS": str(self.spec.threads)}
        if self.start_method is None:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "lynn.agents.workers", json.dumps(asdict(self.spec))],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                env=environ,
            )
            return
        import multiprocessing as mp

        ctx: Any = mp.get_context(self.start_method)
        ours, theirs = ctx.Pipe()
        process = ctx.Process(
            target=_serve_conn, args=(self.spec, theirs, environ, os.getcwd()), name=f"worker-{self.name}"
        )
        process.start()
        theirs.close()  # the child holds its end: our recv sees EOF when it dies
        self.proc = _ChildProcess(process, ours)
        _FORKED.add(self)
        if not _AT_EXIT:  # registered after multiprocessing's own exit hook, so it runs before it
            atexit.register(_close_forked)
            _AT_EXIT.append(True)

    def alive(self) -> bool:
        if self.killed:
            return False
        return self.proc is None or self.proc.poll() is None

    def run(self, task: TaskRef, seed: int) -> Outcome:
        if not self.alive():
            raise WorkerDied(f"{self.name}: process is dead (exit code {self._exitcode()})")
        if self.proc is None:
            self._start()
        assert self.proc is not None
        self.calls += 1
        try:
            _send(self.proc, {"task": asdict(task), "seed": int(seed)})
            line = _receive(self.proc, self.timeout_s)
            if line is None:
                self.kill()
                raise WorkerDied(f"{self.name}: no answer within {self.timeout_s:.0f} s; killed it")
        except (BrokenPipeError, OSError) as exc:
            raise WorkerDied(f"{self.name}: process died mid-call (exit code {self._exitcode()})") from exc
        if not line:
            raise WorkerDied(f"{self.name}: process died mid-call (exit code {self._exitcode()})")
        reply = json.loads(line)
        if "ok" not in reply:
            return Outcome(
                success=False, latency_s=0.0, error=str(reply.get("error")), cost=self.spec.price_per_call
            )
        return Outcome(**reply["ok"])

    def _exitcode(self) -> int | None:
        if self.proc is None:
            return None
        try:
            return self.proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        """SIGKILL the process (a real fault); a worker never started counts as killed too."""
        self.killed = True
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=5.0)

    def restart(self) -> None:
        """Forget a dead process; the next call starts a fresh one."""
        self.close()
        self.killed = False

    def close(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            try:
                _send(proc, {"close": True})
                proc.wait(timeout=10.0)
            except (BrokenPipeError, OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait(timeout=5.0)
        if isinstance(proc, _ChildProcess):
            _FORKED.discard(self)
            proc.conn.close()
            try:
                proc.process.close()  # its sentinel (the process has ended)
            except ValueError:
                pass
            return
        for f in (proc.stdin, proc.stdout):
            if f is not None:
                try:
                    f.close()
                except OSError:
                    pass

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"ProcessWorker({self.name!r}, kind={self.spec.kind!r}, key={self.key!r})"


# --- factories --------------------------------------------------------------------------------
#: The LM workers' reply budget per attempt when the target is the zoo's (no ``target``, no
#: ``$LYNN_LM_TARGET``): a small in-repo LM fails by running to its budget, 3 attempts per execution, and
#: no LM success measured in this pool needed more than 48 tokens (47 successes, 15-48 tokens), so the
#: default pool caps a reply at 128 tokens (BENCHMARKS.md, real pool from a fresh clone).
ZOO_MAX_NEW_TOKENS = 128
EVMQUEST = "Lynn/EVMQuest-v0"
#: Workers that need a draft model.
NEEDS_DRAFT = ("lm-draft", "lm-mars")


def evmquest_pool(
    target: str | None = None,
    draft: str | None = None,
    include: tuple[str, ...] | list[str] | None = None,
    oracle_failure: float = 0.3,
    sampler_temperature: float = 1.0,
    llm_url: str | None = None,
    llm_model: str | None = None,
    extra: list[dict[str, Any]] | None = None,
    threads: int = 1,
    max_new_tokens: int | None = None,
    web_target: str | None = None,
    web_draft: str | None = None,
    web_max_new_tokens: int | None = None,
    start_method: str | None = None,
) -> list[ProcessWorker]:
    """The real pool's Lynn workers, one process each.

    Args:
        target: the in-repo target model folder or ``zoo:NAME`` (default ``$LYNN_LM_TARGET``, else the
            zoo's EVMQuest LM, :func:`lynn.zoo.default_for`; then the reply budget defaults to
            :data:`ZOO_MAX_NEW_TOKENS`).
        draft: its draft (default ``$LYNN_LM_DRAFT``, else the zoo's EVMQuest draft when the target is the
            zoo's and the zoo has one); without one, ``lm-draft`` and ``lm-mars`` are left out of the
            default pool (asking for them is an error).
        include: which of ``lm-target``, ``lm-draft``, ``lm-mars``, ``lm-sampler``, ``oracle`` (and
            ``openai`` when ``llm_url`` is given) to build; default all (those the models allow).
        oracle_failure: injected failure rate of the oracle worker.
        sampler_temperature: the sampler's temperature.
        llm_url, llm_model: an OpenAI-compatible endpoint and model name (adds worker ``openai``).
        extra: more :class:`WorkerSpec` field dicts (e.g. a second oracle with another failure rate).
        threads: torch threads per worker process.
        max_new_tokens: reply budget of every LM worker per attempt (``None``: ``LMPolicy``'s 640 for
            EVMQuest); part of the cache key, since it changes what runs. LiveWeb keeps its own 96.
        web_target, web_draft: the models the LM workers use on LiveWeb instances (default: the same
            as on EVMQuest, e.g. the suite LM, which is trained on both envs).
        web_max_new_tokens: reply budget of every LM worker per LiveWeb step (``None``: ``LMPolicy``'s 96).
        start_method: how each worker's process starts (see :class:`ProcessWorker`; not part of the cache key).

    Raises:
        ValueError: for an unknown worker, a missing model folder (saying which command makes it), or
            a draft-based worker without a draft.
    """
    from lynn import zoo

    target = target or os.environ.get("LYNN_LM_TARGET")
    draft = draft or os.environ.get("LYNN_LM_DRAFT") or None
    no_zoo_lm: zoo.ZooError | None = None
    if target is None:  # the zoo's LM (raised below, naming model=PATH, if an LM worker needs it)
        try:
            target = zoo.default_for(EVMQUEST, "lm")
        except zoo.ZooError as exc:
            no_zoo_lm = exc
        else:
            if max_new_tokens is None:
                max_new_tokens = ZOO_MAX_NEW_TOKENS
            if draft is None:
                try:
                    draft = zoo.default_for(EVMQUEST, "draft")
                except zoo.ZooError:
                    draft = None
    target, draft = zoo.resolve(target), zoo.resolve(draft)
    web_target, web_draft = zoo.resolve(web_target), zoo.resolve(web_draft)
    names = ["lm-target", "lm-draft", "lm-mars", "lm-sampler", "oracle"]
    wanted = list(include) if include is not None else [*names, *(["openai"] if llm_url else [])]
    unknown = [w for w in wanted if w not in names and w != "openai"]
    if unknown:
        raise ValueError(f"unknown worker(s) {unknown}; choose from {[*names, 'openai']}")
    if draft is None:
        if include is None:
            wanted = [w for w in wanted if w not in NEEDS_DRAFT]
        elif any(w in NEEDS_DRAFT for w in wanted):
            raise ValueError(
                f"workers {[w for w in wanted if w in NEEDS_DRAFT]} need a draft model: pass draft=PATH "
                f"(or $LYNN_LM_DRAFT; make one with `lynn train lm --role draft --teacher {target} ...`)"
            )
    if any(w.startswith("lm-") for w in wanted) and no_zoo_lm is not None:
        raise no_zoo_lm
    if any(w.startswith("lm-") for w in wanted) and not Path(target or "").exists():
        raise ValueError(
            f"target model {target!r} does not exist: train one with `lynn train lm`, or pass target=PATH "
            "or a zoo name (target='zoo:evm-lm'; `lynn zoo list`)"
        )
    lm_settings: dict[str, dict[str, Any]] = {
        "lm-target": {"model": target},
        "lm-draft": {"model": draft},
        "lm-mars": {"model": target, "speculative": "mars", "drafter": "draft", "draft": draft},
        "lm-sampler": {"model": target, "temperature": sampler_temperature},
    }
    for budget_name, budget in (
        ("max_new_tokens", max_new_tokens),
        ("web_max_new_tokens", web_max_new_tokens),
    ):
        if budget is not None and (not isinstance(budget, int) or budget < 1):
            raise ValueError(f"{budget_name} must be a positive integer, got {budget!r}")
    if max_new_tokens is not None:
        for settings in lm_settings.values():
            settings["max_new_tokens"] = max_new_tokens
    web_lm: dict[str, dict[str, Any]] = {
        name: {} if web_max_new_tokens is None else {"max_new_tokens": web_max_new_tokens}
        for name in lm_settings
    }
    if web_target is not None:
        for name in ("lm-target", "lm-mars", "lm-sampler"):
            web_lm[name]["model"] = web_target
    if web_draft is not None:
        web_lm["lm-draft"]["model"] = web_draft
        web_lm["lm-mars"]["draft"] = web_draft
    out = []
    for name in wanted:
        if name == "oracle":
            label = f"oracle-f{round(100 * oracle_failure)}"
            spec = WorkerSpec(label, "oracle", *PRICES["oracle"], failure_rate=oracle_failure)
        elif name == "openai":
            if not llm_url or not llm_model:
                raise ValueError("worker openai needs llm_url='http://HOST:PORT/v1' and llm_model=NAME")
            spec = WorkerSpec(
                "openai",
                "openai",
                *PRICES["openai"],
                lm={
                    "llm_url": llm_url,
                    "model": llm_model,
                    **({"max_new_tokens": max_new_tokens} if max_new_tokens is not None else {}),
                },
            )
        else:
            spec = WorkerSpec(name, "lm", *PRICES[name], lm=lm_settings[name], web_lm=web_lm[name])
        spec.threads = threads
        out.append(ProcessWorker(spec, start_method=start_method))
    for fields_ in extra or []:
        out.append(ProcessWorker(WorkerSpec(**fields_), start_method=start_method))
    return out


def workers_from_specs(specs: list[dict[str, Any]], start_method: str | None = None) -> list[ProcessWorker]:
    """Workers from :class:`WorkerSpec` field dicts (``workers="lynn.agents.workers:workers_from_specs"``)."""
    return [ProcessWorker(WorkerSpec(**s), start_method=start_method) for s in specs]


if __name__ == "__main__":
    _serve(WorkerSpec(**json.loads(sys.argv[1])))
