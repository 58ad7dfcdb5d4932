"""The protocol between ``Lynn/Coordination-v0``'s real pool and the workers it routes to, and its cache.

The env imports no agent (DESIGN's import rule). It talks to a worker only through this protocol:

* :class:`TaskRef` names one real task instance: ``(env_id, task_id, seed)`` plus its ``category``
  (the subtask type the router sees). ``seed`` is the env's reset seed, so the instance (the
  instruction, its parameters, the chain state) is the same for every worker.
* :class:`Worker` is anything with ``name``, ``key`` (the identity of what actually runs: model and
  settings, used by the cache), ``deterministic``, ``run(task, seed) -> Outcome``, ``alive()`` and
  ``close()``; optionally ``key_for(task) -> str``, a per-instance key for a worker that runs other
  settings on another env (the cache then uses it instead of ``key``). ``seed`` is the execution seed (the vote index): a sampling worker draws from it, a
  deterministic one ignores it.
* :class:`Outcome` is what one execution produced: the task's own validator verdict (``success``),
  the measured wall time, the generated tokens and the cost (``tokens * price_per_token +
  price_per_call``, the worker's documented price), and an error if the execution could not run.

Workers are built from a ``"module:callable"`` string (like the registry's entry points), resolved
when the pool is built, so ``envs/`` holds no reference to ``agents/``. The factory Lynn ships is
:func:`lynn.agents.workers.evmquest_pool`.

:class:`ResultCache` stores every outcome per ``(worker key, task, execution seed)`` in a JSON-lines
file: a replayed stream runs nothing, and its regret against the best worker is exact.
"""

from __future__ import annotations

import importlib
import json
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

__all__ = ["Outcome", "ResultCache", "TaskRef", "Worker", "WorkerDied", "resolve_factory"]


@dataclass(frozen=True)
class TaskRef:
    """One real task instance.

    Attributes:
        env_id: the env that runs and validates it (``Lynn/EVMQuest-v0``).
        task_id: the task (``erc20_approve``).
        seed: the reset seed that draws the instance.
        category: the subtask type shown to the router (``erc20``, ``query``, ...).
    """

    env_id: str
    task_id: str
    seed: int
    category: str

    def key(self) -> str:
        return f"{self.env_id}|{self.task_id}|{self.seed}"


@dataclass
class Outcome:
    """One execution of a task instance by a worker.

    Attributes:
        success: the task validator's verdict (``info["success"]`` of the task's own env).
        latency_s: measured wall time of the execution (reset excluded: every worker pays it alike).
        tokens: generated tokens (0 for a worker that generates none).
        cost: ``tokens * price_per_token + price_per_call`` of the worker.
        error: why the execution failed to run (a dead process, an env error), else ``None``.
        score: the validator's partial score in [0, 1] (reward of the task env), for reports.
    """

    success: bool
    latency_s: float
    tokens: int = 0
    cost: float = 0.0
    error: str | None = None
    score: float = 0.0


class WorkerDied(RuntimeError):
    """The worker's process is gone (killed or crashed); the call could not be answered."""


@runtime_checkable
class Worker(Protocol):
    """What the real pool needs from a worker (see the module docstring)."""

    name: str
    key: str
    deterministic: bool

    def run(self, task: TaskRef, seed: int) -> Outcome:
        """Execute ``task`` once with execution seed ``seed``; raise :class:`WorkerDied` if gone."""
        ...

    def alive(self) -> bool:
        """Whether the worker can take a call now (a started process that died: ``False``)."""
        ...

    def close(self) -> None:
        """Stop whatever the worker started."""
        ...


def resolve_factory(spec: str) -> Any:
    """The callable named by ``"module:callable"``.

    Raises:
        ValueError: for a malformed or unimportable spec (says what to pass instead).
    """
    module_name, _, attr = str(spec).partition(":")
    if not module_name or not attr:
        raise ValueError(
            f"workers={spec!r}: expected 'module:callable', e.g. 'lynn.agents.workers:evmquest_pool'"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"workers={spec!r}: cannot import {module_name!r} ({exc})") from exc
    try:
        return getattr(module, attr)
    except AttributeError as exc:
        raise ValueError(f"workers={spec!r}: {module_name!r} has no {attr!r}") from exc


class ResultCache:
    """Outcomes per ``(worker key, task instance, execution seed)``, kept in memory and a JSON-lines file.

    A deterministic worker is stored under seed 0 whatever the execution seed (all its executions
    are the same). Appends are flushed line by line, so a run that is interrupted keeps what it
    measured.

    Args:
        path: the file (created with its folder); ``None`` keeps the cache in memory only.
    """

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self._data: dict[tuple[str, str, int], Outcome] = {}
        self._lock = threading.Lock()
        self.hits = self.misses = 0
        if self.path is not None and self.path.exists():
            for line in self.path.read_text().splitlines():
                if not line.strip():
                    continue
                row = json.loads(line)
                self._data[(row["worker"], row["task"], int(row["seed"]))] = Outcome(**row["outcome"])

    @staticmethod
    def _key(worker: Worker, task: TaskRef, seed: int) -> tuple[str, str, int]:
        key_for = getattr(worker, "key_for", None)
        key = key_for(task) if callable(key_for) else worker.key
        return (key, task.key(), 0 if worker.deterministic else int(seed))

    def get(self, worker: Worker, task: TaskRef, seed: int) -> Outcome | None:
        return self._data.get(self._key(worker, task, seed))

    def put(self, worker: Worker, task: TaskRef, seed: int, outcome: Outcome) -> None:
        key = self._key(worker, task, seed)
        with self._lock:
            self._data[key] = outcome
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a") as f:
                    row = {"worker": key[0], "task": key[1], "seed": key[2], "outcome": asdict(outcome)}
                    f.write(json.dumps(row) + "\n")

    def run(self, worker: Worker, task: TaskRef, seed: int) -> tuple[Outcome, bool]:
        """The cached outcome, or run ``worker`` and store it; returns ``(outcome, was_cached)``.

        An execution that failed to run because the worker died is not stored (it says nothing
        about the worker's skill). Raises :class:`WorkerDied` in that case.
        """
        hit = self.get(worker, task, seed)
        if hit is not None:
            self.hits += 1
            return hit, True
        self.misses += 1
        outcome = worker.run(task, seed)
        self.put(worker, task, seed, outcome)
        return outcome, False

    def __len__(self) -> int:
        return len(self._data)
