"""``lynn suite`` / ``make run``: every env of :data:`lynn.suite.plan.PLAN` × its agents, then the leaderboard.

Agent ``lm`` runs the zoo's LM for the env (``zoo:evm-lm``, ``zoo:web-lm``; :mod:`lynn.zoo`), and
``Lynn/WebWorldModel-v0`` runs on its defaults (the zoo's world model and reward model), on the test
instances of this run's LiveWeb expert rows: nothing is trained. ``train=True`` (``lynn suite --train``)
trains the suite's own LM (:mod:`lynn.suite.lm`) and builds its own world model from LiveWeb runs it
records (:mod:`lynn.suite.worldmodel`) instead, each a fixed number of steps. An env whose zoo LM is
missing runs without its ``lm`` row and says so.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lynn.suite.plan import LIVEWEB_ID, LM_ROLE, PLAN, WORLD_MODEL_ID, SuiteEntry


@dataclass
class SuiteConfig:
    """``lynn suite`` options (the command's flags are built from these fields and their ``help``)."""

    out: str = field(default="results", metadata={"help": "results folder (resumable: a rerun reuses it)"})
    env: list[str] | None = field(default=None, metadata={"help": "only this env id (repeatable)"})
    episodes: int | None = field(default=None, metadata={"help": "override each env's episode budget"})
    seed: int = field(default=0, metadata={"help": "base seed; episode i uses seed + i"})
    workers: int = field(default=1, metadata={"help": "episode worker processes per run"})
    progress: bool = field(default=True, metadata={"help": "progress bars on stderr"})
    lm_model: str | None = field(
        default=None,
        metadata={
            "help": "model folder or zoo:NAME for agent 'lm' on every env (default: the zoo's per env)"
        },
    )
    no_lm: bool = field(default=False, metadata={"help": "leave the 'lm' rows out"})
    train: bool = field(
        default=False,
        metadata={"help": "train the suite's own LM and world model (fixed steps) instead of using the zoo"},
    )
    lm_minutes: float | None = field(
        default=None,
        metadata={"help": "with --train: a cap on the LM's training minutes (reported if it binds)"},
    )
    fresh: bool = field(default=False, metadata={"help": "start every run over (no resuming)"})


def _lm_model(cfg: SuiteConfig, env_id: str, cache: dict[str, Any]) -> str | None:
    """The model agent ``lm`` runs on ``env_id``: ``--lm-model``, the trained suite LM, or the zoo's."""
    from lynn import zoo

    if cfg.lm_model:
        return cfg.lm_model
    if cfg.train:
        if "trained" not in cache:
            from lynn.suite.lm import DEFAULT_DIR, ensure_suite_model

            cache["trained"] = ensure_suite_model(DEFAULT_DIR, minutes=cfg.lm_minutes, progress=cfg.progress)
        return cache["trained"]
    key = LIVEWEB_ID if env_id == WORLD_MODEL_ID else env_id
    try:
        name = zoo.default_for(key, LM_ROLE)
        zoo.resolve(name)  # a changed or missing file fails here, with the rebuild command
    except zoo.ZooError as exc:
        print(f"lynn suite: no 'lm' row on {env_id}: {exc}", flush=True)
        return None
    return name


def _world_model_rows(cfg: SuiteConfig) -> tuple[dict[str, Any], list[str]]:
    """env kwargs and test task ids of the WebWorldModel rows: the instances of this results tree's
    LiveWeb expert episodes (else every 6th test instance the world model has a start page for)."""
    from lynn.eval.runner import EvalConfig, list_tasks, read_records, run_dir

    live_cfg = EvalConfig(LIVEWEB_ID, agent="expert", out=cfg.out)
    live = run_dir(live_cfg) / "episodes.jsonl"
    tasks = list(dict.fromkeys(r["task_id"] for r in read_records(live) if r.get("task_id")))
    env_kwargs: dict[str, Any] = {}
    if cfg.train:
        env_kwargs, tasks = _train_world_model(cfg, tasks)
    known = {t["task_id"] for t in list_tasks(WORLD_MODEL_ID, "test", **env_kwargs)}
    tasks = [t for t in tasks if t in known]
    if not tasks:
        tasks = sorted(known)[::6][: cfg.episodes or 10]
    return env_kwargs, tasks


def _train_world_model(cfg: SuiteConfig, tasks: list[str]) -> tuple[dict[str, Any], list[str]]:
    """Build the suite's own world model for ``tasks`` (else every 6th LiveWeb test instance); returns
    its env kwargs and the task ids it recorded start pages for."""
    from lynn.eval.collect import CollectConfig, collect
    from lynn.eval.runner import list_tasks
    from lynn.suite.lm import DEFAULT_DIR as LM_DIR
    from lynn.suite.worldmodel import ensure_suite_world_model

    if not tasks:
        tasks = [t["task_id"] for t in list_tasks(LIVEWEB_ID, "test")][::6][: cfg.episodes or 10]

    def run_collect(
        split: str, ids: Any, out: str, eps: float | None, max_steps: int, agent: str = "expert"
    ) -> dict[str, Any]:
        kw = {"epsilon": eps} if eps is not None else {}
        return collect(
            CollectConfig(
                LIVEWEB_ID,
                agent=agent,
                split=split,
                tasks=list(ids),
                out=out,
                agent_kwargs=kw,
                max_steps=max_steps,
                progress=cfg.progress,
                seed=7 if eps is not None or agent != "expert" else None,
            )
        )

    train = [t["task_id"] for t in list_tasks(LIVEWEB_ID, "train")]
    lm_data = LM_DIR.parent / f"{LM_DIR.name}-data"  # the suite LM's LiveWeb expert runs, when complete
    reuse = [lm_data / "web"] if (lm_data / "collected.json").exists() else []
    info = ensure_suite_world_model(tasks, train, run_collect, reuse=reuse)
    print(
        f"lynn suite: world model {info['model']} ({info['transitions']} transitions, built in "
        f"{info['minutes']:.1f} min; page memory + nearest neighbour, logistic reward model)",
        flush=True,
    )
    return {"model": info["model"], "reward_model": info["reward_model"]}, list(tasks)


def _entries(cfg: SuiteConfig) -> list[SuiteEntry]:
    from lynn.errors import UsageError
    from lynn.registry import ENV_IDS

    unknown = [e for e in cfg.env or [] if e not in ENV_IDS]
    if unknown:
        raise UsageError(f"--env {unknown[0]}: not a registered id ({', '.join(ENV_IDS)})")
    entries = [e for e in PLAN if not cfg.env or e.env_id in cfg.env]
    if not entries:
        raise UsageError("no env of the suite matches --env")
    return entries


def run_suite(cfg: SuiteConfig) -> dict[str, Any]:
    """Run the job; returns ``{"rows", "paths", "minutes", "imagined_vs_real"}`` (also printed by the CLI)."""
    from lynn.eval.leaderboard import write_leaderboard
    from lynn.eval.runner import EvalConfig, evaluate

    started = time.monotonic()
    entries = _entries(cfg)
    cache: dict[str, Any] = {}
    world: tuple[dict[str, Any], list[str]] | None = None
    for entry in entries:
        for agent in entry.agents:
            agent_kwargs: dict[str, Any] = {}
            if agent == "lm":
                if cfg.no_lm:
                    continue
                model = _lm_model(cfg, entry.env_id, cache)
                if model is None:
                    continue
                agent_kwargs = {"model": model}
            env_kwargs, split, tasks = dict(entry.env_kwargs), None, None
            if entry.env_id == WORLD_MODEL_ID:
                if world is None:
                    try:
                        world = _world_model_rows(cfg)
                    except ValueError as exc:  # no zoo world model (and no --train): say so, go on
                        print(f"lynn suite: no {WORLD_MODEL_ID} rows: {exc}", flush=True)
                        world = ({}, [])
                if not world[1]:
                    break
                env_kwargs, tasks, split = dict(world[0]), list(world[1]), "test"
            evaluate(
                EvalConfig(
                    env_id=entry.env_id,
                    agent=agent,
                    episodes=(cfg.episodes or entry.episodes) if tasks is None else 1,
                    seed=cfg.seed,
                    workers=cfg.workers,
                    out=cfg.out,
                    split=split,
                    tasks=tasks,
                    env_kwargs=env_kwargs,
                    agent_kwargs=agent_kwargs,
                    progress=cfg.progress,
                    fresh=cfg.fresh,
                )
            )
    rows, paths = write_leaderboard(cfg.out)
    table = None
    imagined = next((e for e in entries if e.env_id == WORLD_MODEL_ID and e.agents), None)
    if imagined is not None:
        from lynn.suite.worldmodel import DEFAULT_DIR, comparison_markdown, imagined_vs_real, real_outcomes

        test_data = DEFAULT_DIR.parent / f"{DEFAULT_DIR.name}-data" / "test"
        collected = real_outcomes(test_data) if cfg.train and test_data.exists() else None
        table = comparison_markdown(imagined_vs_real(cfg.out, imagined.agents, collected))
        Path(cfg.out, "imagined_vs_real.md").write_text(table)
    return {
        "rows": rows,
        "paths": paths,
        "imagined_vs_real": table,
        "minutes": (time.monotonic() - started) / 60,
    }
