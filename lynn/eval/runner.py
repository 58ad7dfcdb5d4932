"""Run an agent on an env id for N seeded episodes (or over a task list), resumably.

Each finished episode is appended to ``episodes.jsonl`` as one JSON line, so a run that is
interrupted resumes where it stopped; ``summary.json`` is rewritten at the end. Episode ``i`` always
resets the env with seed ``seed + i`` and the agent with :func:`agent_seed` of it, so results do not
depend on ``workers``. The agent's seed is derived, not equal: the same seed would give an agent the
env's own random stream (a random agent would "guess" every hidden value).
"""

from __future__ import annotations

import json
import os
import re
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Literal, cast

import gymnasium as gym

from lynn.eval.stats import mean_ci95, wilson_interval
from lynn.records import EpisodeRecord

RESULT_FILE = "episodes.jsonl"
CONFIG_FILE = "config.json"
SUMMARY_FILE = "summary.json"


class EvalError(ValueError):
    """A user mistake in an evaluation request (unknown env, agent, task or split; config clash)."""


@dataclass
class EvalConfig:
    """What to evaluate and where to write it (``lynn eval``'s flags are its fields).

    Attributes:
        env_id: a registered id (``Lynn/Coordination-v0``; a ``lynn:`` prefix allowed).
        agent: agent name or ``module:Class`` (see :func:`lynn.agents.make_agent`).
        episodes: episodes to run (default 10), or per task with ``split``/``tasks`` (default 1).
        seed: base seed; episode ``i`` uses ``seed + i``.
        workers: parallel worker processes (1 = in this process).
        out: results root; this run writes ``out/<env>/<agent>[__<split>]/``.
        split: evaluate over the env's task list for this split (``lynn tasks ENV --split``).
        tasks: evaluate over these task ids.
        env_kwargs: a ``gym.make`` kwarg (``--env-arg KEY=VALUE``, repeatable; the value as JSON).
        agent_kwargs: an agent kwarg (``--agent-arg KEY=VALUE``, repeatable; the value as JSON).
        max_steps: safety cap on steps per episode on top of the env's own limit.
        progress: show a progress bar (on stderr).
        backend: ``local`` (this machine: in-process or ``workers`` processes) or ``ray``
            (``workers`` Ray actors, on a cluster with ``address``); never changes the results.
        address: Ray cluster to join (``HOST:PORT``); default: start a local Ray.
        label: the leaderboard row's name (default: the agent name), for a variant of an agent, e.g.
            ``lm-grpo`` for agent ``lm`` with another model; it also names the run folder, so two
            variants write two folders under one ``out``.
        fresh: start over: remove this run's folder first (default: resume from its episodes).
    """

    env_id: str = field(metadata={"positional": True})
    agent: str = "random"
    episodes: int | None = None
    seed: int = 0
    workers: int = 1
    out: str = "results"
    split: str | None = None
    tasks: list[str] | None = None
    env_kwargs: dict[str, Any] = field(
        default_factory=dict, metadata={"flag": "--env-arg", "key_value": True}
    )
    agent_kwargs: dict[str, Any] = field(
        default_factory=dict, metadata={"flag": "--agent-arg", "key_value": True}
    )
    max_steps: int | None = None
    progress: bool = True
    backend: str = field(default="local", metadata={"choices": ("local", "ray")})
    address: str | None = None
    label: str | None = None
    fresh: bool = False

    def identity(self) -> dict[str, Any]:
        """The fields that define the results; a resumed run must match them."""
        ident = {
            "env_id": self.env_id,
            "agent": self.agent,
            "seed": self.seed,
            "split": self.split,
            "tasks": self.tasks,
            "env_kwargs": self.env_kwargs,
            "agent_kwargs": self.agent_kwargs,
            "max_steps": self.max_steps,
        }
        if self.label is not None:  # only when set: unlabeled runs keep their old config.json
            ident["label"] = self.label
        return ident

    @property
    def row_name(self) -> str:
        """The leaderboard row's name: the label, else the agent name."""
        return self.label if self.label is not None else self.agent


@dataclass(frozen=True)
class EpisodeSpec:
    """One planned episode."""

    index: int
    seed: int
    task_id: str | None = None
    split: str | None = None


def slug(text: str) -> str:
    """A file-system-safe name for an env id or agent name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "x"


def run_dir(cfg: EvalConfig) -> Path:
    """Where ``cfg``'s results live."""
    name = slug(cfg.row_name) + (f"__{slug(cfg.split)}" if cfg.split else "")
    return Path(cfg.out) / slug(bare_id(cfg.env_id)) / name


def env_class(env_id: str) -> type[gym.Env]:
    """The env class behind a registered id (imports only that env's module)."""
    spec = _spec(env_id)
    entry = spec.entry_point
    if callable(entry):
        return entry  # type: ignore[return-value]
    module_name, _, attr = str(entry).partition(":")
    module = __import__(module_name, fromlist=[attr])
    return getattr(module, attr)


def bare_id(env_id: str) -> str:
    """``env_id`` without a ``module:`` prefix (``lynn:Lynn/X-v0`` -> ``Lynn/X-v0``)."""
    return env_id.rpartition(":")[2]


def _spec(env_id: str) -> gym.envs.registration.EnvSpec:
    import importlib

    import lynn  # noqa: F401  (registers the ids)

    module = env_id.rpartition(":")[0]
    if module:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise EvalError(f"env id {env_id!r}: cannot import {module!r} ({exc})") from exc
    try:
        return gym.spec(bare_id(env_id))
    except gym.error.Error as exc:
        import lynn.registry

        raise EvalError(f"unknown env id {env_id!r}; registered: {', '.join(lynn.registry.ENV_IDS)}") from exc


def list_tasks(env_id: str, split: str | None = None, **env_kwargs: Any) -> list[dict[str, Any]]:
    """The env's task list (dicts with at least ``task_id`` and ``split``).

    Envs with a task bank expose a classmethod ``list_tasks(split=None, **env_kwargs)`` and accept
    ``reset(options={"task_id": ...})``.
    """
    cls = env_class(env_id)
    lister: Callable[..., list[dict[str, Any]]] | None = getattr(cls, "list_tasks", None)
    if lister is None:
        raise EvalError(f"{env_id} has no task list; evaluate it by --episodes and --seed")
    try:
        return lister(split=split, **env_kwargs)
    except (KeyError, ValueError) as exc:
        raise EvalError(f"{env_id}: {exc}") from exc


def plan(cfg: EvalConfig) -> list[EpisodeSpec]:
    """The episodes ``cfg`` asks for, in order."""
    if cfg.tasks is None and cfg.split is None:
        n = 10 if cfg.episodes is None else cfg.episodes
        return [EpisodeSpec(i, cfg.seed + i) for i in range(n)]
    # --split names the list; an env that also takes a ``split`` kwarg (which recorded starts it resets to)
    # may be given it by --env-arg too, so it is not passed twice.
    known = list_tasks(cfg.env_id, cfg.split, **{k: v for k, v in cfg.env_kwargs.items() if k != "split"})
    by_id = {t["task_id"]: t for t in known}
    if cfg.tasks is not None:
        missing = [t for t in cfg.tasks if t not in by_id]
        if missing:
            raise EvalError(f"unknown task ids for {cfg.env_id}: {', '.join(missing[:5])}")
        chosen = [by_id[t] for t in cfg.tasks]
    else:
        chosen = known
    if not chosen:
        raise EvalError(f"{cfg.env_id} has no tasks in split {cfg.split!r}")
    repeats = 1 if cfg.episodes is None else cfg.episodes
    specs, i = [], 0
    for task in chosen:
        for _ in range(repeats):
            specs.append(EpisodeSpec(i, cfg.seed + i, task["task_id"], task.get("split")))
            i += 1
    return specs


def agent_seed(env_seed: int) -> int:
    """The agent's seed for an episode whose env seed is ``env_seed`` (independent stream)."""
    import numpy as np

    return int(np.random.SeedSequence(entropy=env_seed, spawn_key=(1,)).generate_state(1)[0])


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".strip()


class _Episodes:
    """Makes env + agent once per process and runs episodes with them; rebuilds after a crash."""

    def __init__(self, cfg: EvalConfig) -> None:
        self.cfg = cfg
        self.env: gym.Env | None = None
        self.agent: Any = None

    def _build(self) -> None:
        from lynn.agents import make_agent

        self.env = gym.make(self.cfg.env_id, **self.cfg.env_kwargs)
        self.agent = make_agent(self.cfg.agent, self.env, **self.cfg.agent_kwargs)

    def close(self) -> None:
        if self.env is not None:
            try:
                self.env.close()
            finally:
                self.env = None

    def run(self, spec: EpisodeSpec) -> EpisodeRecord:
        record: EpisodeRecord = {
            "env_id": bare_id(self.cfg.env_id),
            # A split chosen by env kwarg (e.g. gym.make(..., split="test")) is still the row's split.
            "split": spec.split or self.cfg.env_kwargs.get("split"),
            "task_id": spec.task_id,
            "episode": spec.index,
            "seed": spec.seed,
            "agent": self.cfg.agent,
            "reward": 0.0,
            "success": False,
            "steps": 0,
            "error": None,
            "step_errors": 0,
            "timings": {},
        }
        if self.cfg.label is not None:  # the row name, when it is not the agent's
            record["label"] = self.cfg.label
        timings = {"reset_s": 0.0, "act_s": 0.0, "step_s": 0.0}
        start = time.perf_counter()
        try:
            if self.env is None:
                self._build()
            env, agent = self.env, self.agent
            assert env is not None  # _build made it
            t = time.perf_counter()
            options = {"task_id": spec.task_id} if spec.task_id is not None else None
            obs, info = env.reset(seed=spec.seed, options=options)
            agent.reset(seed=agent_seed(spec.seed))
            timings["reset_s"] = time.perf_counter() - t
            record["task_id"] = info.get("task_id", spec.task_id)
            # A non-default scoring profile an env reports at reset is part of the row's split
            # (EVMQuest: "atomic/reference"), so profiles never mix in one leaderboard row.
            profile = info.get("scoring")
            if isinstance(profile, str) and profile not in ("", "default") and record["split"]:
                record["split"] = f"{record['split']}/{profile}"
            total, steps, last_error = 0.0, 0, info.get("error")
            regret: float | None = None
            while True:
                t = time.perf_counter()
                action = agent.act(obs, info)
                timings["act_s"] += time.perf_counter() - t
                t = time.perf_counter()
                next_obs, reward, terminated, truncated, info = env.step(action)
                timings["step_s"] += time.perf_counter() - t
                agent.observe(action, float(reward), next_obs, terminated, truncated, info)
                obs = next_obs
                total += float(reward)
                steps += 1
                if info.get("error"):
                    last_error = str(info["error"])
                    record["step_errors"] += 1
                if isinstance(info.get("regret"), int | float):  # per-step regret (Coordination)
                    regret = (regret or 0.0) + float(info["regret"])
                if terminated or truncated or (self.cfg.max_steps and steps >= self.cfg.max_steps):
                    break
            record["reward"] = total
            record["steps"] = steps
            record["success"] = bool(info["success"]) if "success" in info else total > 0
            record["error"] = last_error
            if "score" in info:
                record["score"] = float(info["score"])
            if regret is not None:
                record["regret"] = regret
        except Exception as exc:  # an env or agent crash is a result, not the end of the run
            record["error"] = _error_text(exc)
            record["traceback"] = traceback.format_exc(limit=8)
            self.close()  # the env may be broken; the next episode builds a fresh one
        timings["total_s"] = time.perf_counter() - start
        record["timings"] = {k: round(v, 6) for k, v in timings.items()}
        return record


# --- worker processes -------------------------------------------------------------------------
_WORKER: _Episodes | None = None


def _worker_init(cfg: EvalConfig) -> None:
    global _WORKER
    import lynn  # noqa: F401

    _WORKER = _Episodes(cfg)


def _worker_run(spec: EpisodeSpec) -> EpisodeRecord:
    assert _WORKER is not None
    return _WORKER.run(spec)


def _run_parallel(cfg: EvalConfig, todo: list[EpisodeSpec]) -> Iterator[EpisodeRecord]:
    ctx = get_context("spawn")  # fork is unsafe with browser/torch threads in the parent
    with ProcessPoolExecutor(cfg.workers, mp_context=ctx, initializer=_worker_init, initargs=(cfg,)) as pool:
        pending = {pool.submit(_worker_run, spec) for spec in todo}
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            broken = None
            for fut in done:
                try:
                    record = fut.result()
                except BrokenProcessPool as exc:  # a worker died outside Python (killed, native crash)
                    broken = exc
                    continue
                yield record
            if broken is not None:
                for fut in pending:
                    fut.cancel()
                raise EvalError(
                    "a worker process died abruptly (killed, or crashed in native code); the finished "
                    "episodes are saved: run the same command again to resume, or with --workers 1 to see "
                    "which episode kills it"
                ) from broken


class _RayEpisodes:
    """Ray actor body: one ``_Episodes`` per actor (wrapped with ``ray.remote`` when used)."""

    def __init__(self, cfg: EvalConfig) -> None:
        _worker_init(cfg)

    def run(self, spec: EpisodeSpec) -> EpisodeRecord:
        return _worker_run(spec)


def _run_ray(cfg: EvalConfig, todo: list[EpisodeSpec]) -> Iterator[EpisodeRecord]:
    import ray

    from lynn.raytools import ray_init

    started = ray_init(cfg.address)
    actor_cls = ray.remote(_RayEpisodes).options(num_cpus=1)
    # Any: Ray's stubs type an actor's methods as plain callables (``.remote`` is added at run time).
    actors: list[Any] = [actor_cls.remote(cfg) for _ in range(min(cfg.workers, len(todo)))]
    queue = list(reversed(todo))
    running: dict[Any, tuple[int, EpisodeSpec]] = {}
    try:
        for k in range(len(actors)):
            if queue:
                spec = queue.pop()
                running[actors[k].run.remote(spec)] = (k, spec)
        while running:
            done, _ = ray.wait(list(running), num_returns=1)
            k, spec = running.pop(done[0])
            try:
                yield ray.get(done[0])
            except ray.exceptions.RayActorError as exc:  # a lost node/actor is a result, like a crash
                actors[k] = actor_cls.remote(cfg)
                lost: EpisodeRecord = {
                    "env_id": bare_id(cfg.env_id),
                    "split": spec.split,
                    "task_id": spec.task_id,
                    "episode": spec.index,
                    "seed": spec.seed,
                    "agent": cfg.agent,
                    "reward": 0.0,
                    "success": False,
                    "steps": 0,
                    "error": _error_text(exc),
                    "step_errors": 0,
                    "traceback": str(exc)[:2000],
                    "timings": {"total_s": 0.0},
                }
                if cfg.label is not None:
                    lost["label"] = cfg.label
                yield lost
            if queue:
                spec = queue.pop()
                running[actors[k].run.remote(spec)] = (k, spec)
    finally:
        for actor in actors:
            ray.kill(actor)
        if started:
            ray.shutdown()


def _run_serial(
    cfg: EvalConfig, todo: list[EpisodeSpec], runner: _Episodes | None = None
) -> Iterator[EpisodeRecord]:
    runner = runner or _Episodes(cfg)
    try:
        for spec in todo:
            yield runner.run(spec)
    finally:
        runner.close()


# --- results files ----------------------------------------------------------------------------
def read_records(path: Path) -> list[EpisodeRecord]:
    """Episode records from a JSONL file; a torn last line (killed mid-write) is dropped."""
    records: list[EpisodeRecord] = []
    if not path.exists():
        return records
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict) and "episode" in rec:
            records.append(cast(EpisodeRecord, rec))
    return records


#: Optional per-episode measures, averaged where every record has them.
EXTRA_MEASURES: tuple[Literal["score", "regret"], ...] = ("score", "regret")


def summarize(records: list[EpisodeRecord], cfg: EvalConfig | None = None) -> dict[str, Any]:
    """Aggregate episode records into the summary written to ``summary.json``."""
    rewards = [float(r["reward"]) for r in records]
    successes = [1.0 if r["success"] else 0.0 for r in records]
    mean_r, ci_r = mean_ci95(rewards)
    mean_s, ci_s = mean_ci95(successes)
    low, high = wilson_interval(int(sum(successes)), len(successes))
    first: dict[str, Any] = dict(records[0]) if records else {}
    summary: dict[str, Any] = {
        "env_id": bare_id(cfg.env_id) if cfg else first.get("env_id"),
        "agent": cfg.agent if cfg else first.get("agent"),
        "label": cfg.row_name if cfg else first.get("label", first.get("agent")),
        "split": cfg.split if cfg else first.get("split"),
        "seed": cfg.seed if cfg else None,
        "episodes": len(records),
        "successes": int(sum(successes)),
        "success_rate": mean_s,
        "success_ci95": ci_s,  # Student's t half-width, kept for old readers; report the Wilson interval
        "success_wilson95": [low, high],
        "mean_reward": mean_r,
        "reward_ci95": ci_r,
        "mean_steps": (sum(r["steps"] for r in records) / len(records)) if records else 0.0,
        "crashed_episodes": sum(1 for r in records if r.get("traceback")),
        **{
            f"mean_{key}": mean_ci95([float(r[key]) for r in records])[0]
            for key in EXTRA_MEASURES
            if records and all(key in r for r in records)
        },
        "episode_seconds": (sum(r["timings"]["total_s"] for r in records) / len(records)) if records else 0.0,
    }
    return summary


def evaluate(cfg: EvalConfig) -> dict[str, Any]:
    """Run (or resume) ``cfg``; return the summary (also written to ``summary.json``)."""
    from lynn.agents import UnknownAgentError, resolve_agent

    if cfg.backend not in ("local", "ray"):
        raise EvalError(f"--backend must be local or ray, got {cfg.backend!r}")
    if cfg.address and cfg.backend != "ray":
        raise EvalError("--address needs --backend ray")
    if cfg.workers < 1:
        raise EvalError("--workers must be at least 1")
    if cfg.episodes is not None and cfg.episodes < 1:
        raise EvalError("--episodes must be at least 1")
    if cfg.label is not None and not re.search(r"[A-Za-z0-9]", cfg.label):
        raise EvalError(f"--label must contain a letter or digit, got {cfg.label!r}")
    _spec(cfg.env_id)
    specs = plan(cfg)
    out = run_dir(cfg)
    if cfg.fresh and out.exists():
        import shutil

        shutil.rmtree(out)
    config_path = out / CONFIG_FILE
    if config_path.exists():
        previous = json.loads(config_path.read_text())
        if previous != json.loads(json.dumps(cfg.identity())):
            raise EvalError(
                f"{out} holds results of a different configuration; choose another --out, remove it, "
                "or pass --fresh to start over"
            )
    path = out / RESULT_FILE
    records = [r for r in read_records(path) if r["episode"] < len(specs)]
    done = {r["episode"] for r in records}
    todo = [s for s in specs if s.index not in done]
    runner: _Episodes | None = None
    if todo:
        try:  # fail fast on a bad agent name, before any env or worker starts
            resolve_agent(cfg.agent, bare_id(cfg.env_id))
        except UnknownAgentError as exc:
            raise EvalError(str(exc)) from exc
        # Build the env and the agent once before anything is recorded: a run that cannot start (a
        # missing model, a bad kwarg) is a configuration error, not N failed episodes.
        runner = _Episodes(cfg)
        try:
            runner._build()
        except Exception as exc:
            runner.close()
            raise EvalError(f"{cfg.env_id} · {cfg.row_name} cannot start: {_error_text(exc)}") from exc
        if cfg.workers > 1 or cfg.backend == "ray":
            runner.close()  # the workers build their own
            runner = None
    out.mkdir(parents=True, exist_ok=True)
    config_path.write_text(json.dumps(cfg.identity(), indent=2, sort_keys=True) + "\n")
    # Rewrite without a torn last line so appended lines stay parseable.
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in records), encoding="utf-8")
    if records:
        import sys

        what = f"resumed {len(records)} of {len(specs)} episodes from {out}"
        print(
            f"{cfg.env_id} · {cfg.row_name}: "
            + (what if todo else f"all {len(specs)} episodes already in {out} (--fresh starts over)"),
            file=sys.stderr,
            flush=True,
        )

    if todo:
        if cfg.backend == "ray":
            results = _run_ray(cfg, todo)
        else:
            results = _run_parallel(cfg, todo) if cfg.workers > 1 else _run_serial(cfg, todo, runner)
        with path.open("a", encoding="utf-8") as fh, _Progress(cfg, len(specs), records) as bar:
            for rec in results:
                fh.write(json.dumps(rec, sort_keys=True) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
                records.append(rec)
                bar.advance(rec)
    records.sort(key=lambda r: r["episode"])
    summary = summarize(records, cfg)
    summary["results"] = str(path)
    summary["resumed"] = len(done)
    (out / SUMMARY_FILE).write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return summary


class _Progress:
    """A rich progress bar with the running success rate, on stderr."""

    def __init__(self, cfg: EvalConfig, total: int, done: list[EpisodeRecord]) -> None:
        self.enabled = cfg.progress
        self.total = total
        self.wins = sum(1 for r in done if r["success"])
        self.count = len(done)
        self.label = f"{cfg.env_id} · {cfg.row_name}"

    def __enter__(self) -> _Progress:
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self.bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("success {task.fields[rate]}"),
                TimeRemainingColumn(),
                console=Console(stderr=True),
            )
            self.bar.start()
            self.task = self.bar.add_task(
                self.label, total=self.total, completed=self.count, rate=self._rate()
            )
        return self

    def _rate(self) -> str:
        return f"{self.wins / self.count:.1%}" if self.count else "-"

    def advance(self, rec: EpisodeRecord) -> None:
        self.count += 1
        self.wins += bool(rec["success"])
        if self.enabled:
            self.bar.update(self.task, advance=1, rate=self._rate())

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self.bar.stop()


def config_dict(cfg: EvalConfig) -> dict[str, Any]:
    """``cfg`` as plain data."""
    return asdict(cfg)
