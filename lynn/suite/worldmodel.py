"""The suite's ``Lynn/WebWorldModel-v0`` rows: the world model ``lynn suite --train`` builds, and imagined vs real.

By default the suite's WebWorldModel rows use the zoo's world model and reward model (``zoo:webworld``,
``zoo:web-reward``: the env's defaults). With ``--train`` it builds its own, as below. Nothing is
downloaded and no LM is trained: that world model is the **page memory** (pages seen in
training keyed by URL, with the nearest training transition's Δ where memory has nothing; see
:class:`lynn.envs.worldmodel.baselines.MemoryModel`) plus the logistic reward model, both fitted in
seconds from LiveWeb transitions the suite records itself with ``lynn collect``:

- ``train/``: the LiveWeb expert on every :data:`TRAIN_STRIDE`-th train task (or, when the suite LM's
  collection already ran in this results tree, its LiveWeb transitions — the same tasks — are reused);
- ``eps/``: the ε-random expert (ε = :data:`EPSILON`, at most :data:`EPS_MAX_STEPS` steps) on every
  :data:`EPS_STRIDE`-th train task, and ``random/``: the random agent on as many other train tasks — real
  failures for the reward model (without the random agent's, it scored random answers as successes);
- ``test/``: the expert on the test instances the suite evaluates: their real start pages (what the
  env resets to) and their real outcomes. Test transitions never enter the model (train split only).

The collection itself is passed in (``collect``: see :data:`Collect`; :mod:`lynn.suite.run` wraps
``lynn collect``).

:func:`imagined_vs_real` reads the suite's result files and puts imagined success (WebWorldModel) next to
real success (LiveWeb) of the same task instances and agent.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

DEFAULT_DIR = Path("build") / "suite-worldmodel"
TRAIN_STRIDE = 4
EPS_STRIDE = 24
EPSILON = 0.2
EPS_MAX_STEPS = 12
READY = "suite.json"

RANDOM_STRIDE = 24
#: ``collect(split, task_ids, out, epsilon, max_steps, agent) -> counts``: ``agent`` (``expert``, ε-random
#: if ``epsilon`` is given, or ``random``) on LiveWeb.
Collect = Callable[[str, Sequence[str], str, float | None, int, str], dict[str, Any]]


def _has_transitions(folder: Path) -> bool:
    return folder.is_dir() and any(f.stat().st_size > 0 for f in folder.rglob("transitions*.jsonl"))


def _collect_once(
    collect: Collect,
    folder: Path,
    split: str,
    tasks: Sequence[str],
    eps: float | None,
    max_steps: int = 30,
    agent: str = "expert",
) -> None:
    stamp = folder / "collected.json"
    if stamp.exists() and json.loads(stamp.read_text()).get("tasks") == list(tasks):
        return
    if folder.exists():  # partial or for other tasks: start over (collect appends)
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    counts = collect(split, list(tasks), str(folder), eps, max_steps, agent)
    stamp.write_text(json.dumps({"tasks": list(tasks), "counts": counts}))


def ensure_suite_world_model(
    test_tasks: Sequence[str],
    train_tasks: Sequence[str],
    collect: Collect,
    path: str | Path = DEFAULT_DIR,
    reuse: Sequence[str | Path] = (),
    with_eps: bool = True,
) -> dict[str, Any]:
    """The suite's world-model folder, built first where missing or made for other test instances.

    Args:
        test_tasks: LiveWeb test task ids the suite evaluates (their start pages are recorded).
        train_tasks: the LiveWeb train task ids (every ``TRAIN_STRIDE``-th is collected).
        collect: see :data:`Collect` (:mod:`lynn.suite.run` wraps ``lynn collect``).
        path: output folder (``worldmodel.json``, ``memory.jsonl``, ``starts.jsonl``, ``reward.json``).
        reuse: folders that may already hold expert train transitions of the same tasks (suite LM data).
        with_eps: also collect ε-random and random-agent failures for the reward model.

    Returns:
        ``{"model": folder, "reward_model": folder, "minutes": build time, ...}`` (also in ``suite.json``).
    """
    from lynn.envs.worldmodel.reward_model import train_reward_model
    from lynn.envs.worldmodel.train import WorldModelConfig, train_world_model

    path = Path(path)
    ready = path / READY
    if ready.exists():
        info = json.loads(ready.read_text())
        if info.get("test_tasks") == list(test_tasks):
            return info
    started = time.monotonic()
    data = path.parent / f"{path.name}-data"
    train_src = next((Path(r) for r in reuse if _has_transitions(Path(r))), None)
    if train_src is None:
        train_src = data / "train"
        _collect_once(collect, train_src, "train", list(train_tasks)[::TRAIN_STRIDE], None)
    sources = [str(train_src)]
    if with_eps:
        _collect_once(collect, data / "eps", "train", list(train_tasks)[::EPS_STRIDE], EPSILON, EPS_MAX_STEPS)
        sources.append(str(data / "eps"))
        _collect_once(
            collect,
            data / "random",
            "train",
            list(train_tasks)[1::RANDOM_STRIDE],
            None,
            EPS_MAX_STEPS,
            "random",
        )
        sources.append(str(data / "random"))
    _collect_once(collect, data / "test", "test", list(test_tasks), None)
    sources.append(str(data / "test"))
    wm = train_world_model(
        WorldModelConfig(data=sources, out=str(path), kind="memory", all_templates=True, progress=False)
    )
    rm = train_reward_model(sources, str(path), all_templates=True)
    info = {
        "model": str(path),
        "reward_model": str(path),
        "test_tasks": list(test_tasks),
        "sources": sources,
        "transitions": wm["transitions"],
        "reward_train": rm["train"],
        "minutes": (time.monotonic() - started) / 60,
    }
    ready.write_text(json.dumps(info, indent=1))
    return info


def _records(folder: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for f in sorted(folder.rglob("episodes.jsonl")) if folder.is_dir() else []:
        with f.open(encoding="utf-8") as fh:
            out += [json.loads(line) for line in fh if line.strip()]
    return out


def real_outcomes(test_data: str | Path) -> dict[str, bool]:
    """task id -> success of the expert's recorded LiveWeb episode (``lynn collect`` transitions)."""
    from lynn.envs.worldmodel.data import episodes, read_transitions

    return {
        e[-1]["task_id"]: float(e[-1].get("reward", 0.0)) >= 1.0
        for e in episodes(read_transitions(test_data))
        if e
    }


def imagined_vs_real(
    results: str | Path, agents: Sequence[str], collected: dict[str, bool] | None = None
) -> list[dict[str, Any]]:
    """Per agent: imagined success (``Lynn/WebWorldModel-v0`` episodes under ``results``) beside the real
    success (``Lynn/LiveWeb-v0`` episodes of the same agent) on the task instances both ran.

    Where LiveWeb has no episode of the agent for an instance, ``collected`` (task id -> real success of
    the expert's ``lynn collect`` episode) stands in for the expert. Rows: ``agent``, ``instances``,
    ``imagined``, ``real``, ``real_source``.
    """
    recs = [r for r in _records(Path(results)) if r.get("task_id")]
    imag = [r for r in recs if r.get("env_id") == "Lynn/WebWorldModel-v0"]
    live = [r for r in recs if r.get("env_id") == "Lynn/LiveWeb-v0"]
    rows = []
    for agent in agents:
        mine = [r for r in imag if r["agent"] == agent]
        real: dict[str, list[bool]] = {}
        for r in live:
            if r["agent"] == agent:
                real.setdefault(r["task_id"], []).append(bool(r["success"]))
        source = "LiveWeb-v0 suite episodes"
        if not any(r["task_id"] in real for r in mine) and agent == "expert" and collected:
            real = {k: [v] for k, v in collected.items()}
            source = "lynn collect (expert, LiveWeb)"
        both = [r for r in mine if r["task_id"] in real]
        if not both:
            rows.append(
                {"agent": agent, "instances": 0, "imagined": None, "real": None, "real_source": "none"}
            )
            continue
        imagined = sum(bool(r["success"]) for r in both) / len(both)
        real_rate = sum(sum(real[r["task_id"]]) / len(real[r["task_id"]]) for r in both) / len(both)
        rows.append(
            {
                "agent": agent,
                "instances": len(both),
                "imagined": imagined,
                "real": real_rate,
                "real_source": source,
            }
        )
    return rows


def comparison_markdown(rows: Sequence[dict[str, Any]]) -> str:
    """The :func:`imagined_vs_real` rows as a Markdown table."""

    def pct(v: float | None) -> str:
        return "—" if v is None else f"{v:.1%}"

    lines = [
        "| agent | instances | imagined success (WebWorldModel) | real success (LiveWeb) | real from |",
        "|---|---:|---:|---:|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['agent']} | {r['instances']} | {pct(r['imagined'])} | {pct(r['real'])} | {r['real_source']} |"
        )
    return "\n".join(lines) + "\n"
