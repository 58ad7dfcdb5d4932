"""The real-pool routing benchmark: routers on replayed streams of real EVMQuest executions.

1. **Fill** (first run only; cached): every worker of :func:`lynn.agents.workers.evmquest_pool` runs
   every calibration and stream instance once (one thread per worker, each talking to its own
   process), so every replayed stream below is free and its regret exact. The wall time is printed.
2. **Replay**: each router routes ``--steps`` subtasks on ``--seeds`` seeded streams of
   ``scenario="real-pool"`` (the same streams for every router); success is the validator's verdict,
   cost the measured tokens x price, latency the measured wall time (from the cache).

With ``--shock`` (a kill, degrade or join of a real worker at a given decision) the table adds
success before/after the shock, the regret after it, recovery steps (rolling-50 success back to 0.9x
the pre-shock level, held 50 steps) and, for a join, the steps until the newcomer gets half of 50
decisions. ``--standby`` runs the simulated ``standby-shock`` recovery instead, measured on realised
and on expected success (``info["expected_success"]``) over the same streams.

Routers: our LinUCB (with and without stage-1 screening), linear Thompson, MABWiser's LinUCB, VW's
``--cb_explore_adf`` (SquareCB, epsilon-greedy), every single worker alone, and the privileged oracle
(the best worker on each instance in hindsight). Regret is the gap to that oracle; "regret vs best
single" is the gap in successes to the best single worker over the same stream.

Run: ``lynn bench coordination_real [--target PATH --draft PATH]`` (or
``benchmarks/bench_coordination_real.py``); without ``--target`` it uses the zoo's EVMQuest LM
(``zoo:evm-lm``: the real pool's default workers, :func:`lynn.agents.workers.evmquest_pool`).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from lynn.agents import Agent
from lynn.agents.bandits import OracleRouter, ThompsonAgent
from lynn.agents.linucb import LinUCBAgent
from lynn.bench.coordination import MABWiserLinUCB, VWCbExploreAdf
from lynn.envs.coordination.coordination_env import CoordinationEnv
from lynn.envs.coordination.metrics import recovery_time
from lynn.envs.coordination.workers_protocol import WorkerDied
from lynn.errors import UsageError


class FixedWorker(Agent):
    """Always the same slot when it can take the call, else the first available one."""

    def __init__(self, env: gym.Env, slot: int) -> None:
        super().__init__(env)
        self.slot = slot
        self.name = f"single:{slot}"

    def act(self, obs: dict[str, np.ndarray], info: dict[str, Any]) -> int:
        mask = obs["action_mask"]
        if mask[self.slot]:
            return self.slot
        avail = np.flatnonzero(mask)
        return int(avail[0]) if avail.size else self.slot


ROUTERS: dict[str, Callable[[gym.Env], Agent]] = {
    "linucb (ours)": lambda env: LinUCBAgent(env),
    "linucb no-screening (ours)": lambda env: LinUCBAgent(env, screening=False),
    "linucb no change-detection (ours)": lambda env: LinUCBAgent(env, change_detect=False),
    "thompson (ours)": lambda env: ThompsonAgent(env),
    "mabwiser LinUCB α=1": lambda env: MABWiserLinUCB(env, alpha=1.0),
    "vw cb_explore_adf squarecb": lambda env: VWCbExploreAdf(env, "--cb_explore_adf --squarecb -q sa"),
    "vw cb_explore_adf ε=0.05": lambda env: VWCbExploreAdf(env),
    "oracle (privileged, best worker per instance)": lambda env: OracleRouter(env),
}


def scenario_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    kw: dict[str, Any] = {
        "worker_kwargs": {
            "target": args.target,
            "draft": args.draft,
            "oracle_failure": args.oracle_failure,
            "include": tuple(args.workers.split(",")) if args.workers else None,
            **({"llm_url": args.llm_url, "llm_model": args.llm_model} if args.llm_url else {}),
            **({"web_target": args.web_target} if args.web_target else {}),
            **({"web_draft": args.web_draft} if args.web_draft else {}),
        },
        "cache": args.cache,
        "categories": tuple(args.categories.split(",")) if args.categories else None,
        "tasks_per_category": args.tasks_per_category,
        "stream_seeds": tuple(range(args.stream_seeds)),
        "liveweb": args.liveweb,
    }
    if args.shock:
        kw["shocks"] = (json.loads(args.shock),)
    return kw


def fill(env: CoordinationEnv, votes: int, threads: int | None = None) -> tuple[float, int]:
    """Run every worker on every calibration and stream instance (cached); return (seconds, new runs).

    ``threads`` workers run at once (default: all, each talking to its own process).
    """
    sc = env.scenario
    cache = sc.result_cache
    refs = [
        r
        for seeds in (sc.calibration_seeds, sc.stream_seeds)
        for rs in sc.instances(seeds).values()
        for r in rs
    ]
    before = cache.misses
    start = time.perf_counter()

    def one(worker: Any) -> None:
        for ref in refs:
            for j in range(1 if worker.deterministic else votes):
                try:
                    cache.run(worker, ref, j)
                except WorkerDied:
                    return

    with ThreadPoolExecutor(max_workers=threads or len(sc.all_workers())) as pool:
        list(pool.map(one, sc.all_workers()))
    return time.perf_counter() - start, cache.misses - before


@dataclass
class Result:
    router: str
    success: float
    cost_per_correct: float
    latency_s: float
    regret: float
    regret_vs_single: float
    share: dict[str, float]
    shock: int | None = None
    pre: float | None = None
    post: float | None = None
    post_regret: float | None = None
    recovery: list[int | None] = field(default_factory=list)
    adoption: list[int | None] = field(default_factory=list)


def replay(
    make: Callable[[gym.Env], Agent],
    kw: dict[str, Any],
    steps: int,
    seed: int,
    votes: int,
    cost_weight: float,
) -> dict:
    env = CoordinationEnv(scenario="real-pool", scenario_kwargs=kw, votes=votes, cost_weight=cost_weight)
    agent = make(env)
    obs, info = env.reset(seed=seed)
    agent.reset(seed=seed)
    names = env.pool.names()
    rows: dict[str, list] = {
        "r": [],
        "cost": [],
        "lat": [],
        "regret": [],
        "agent": [],
        "per_worker": [],
        "events": [],
    }
    for _ in range(steps):
        # What every worker would score on this instance (exact, from the cache): "best single" regret.
        per = env.scenario.expected(env.pool, env.task, votes)
        action = agent.act(obs, info)
        obs, reward, terminated, truncated, info = env.step(action)
        agent.observe(action, reward, obs, terminated, truncated, info)
        rows["r"].append(float(info["expected_success"]))  # the vote's validator outcome (0/1)
        rows["cost"].append(info["cost"])
        rows["lat"].append(info["latency_ms"] / 1000.0)
        rows["regret"].append(info["regret"])
        rows["agent"].append(info["agent"])
        rows["per_worker"].append(per)
        rows["events"].append(list(info["events"]))
    misses = env.scenario.result_cache.misses
    close = getattr(agent, "close", None)
    if close is not None:
        close()
    env.close()
    return {**rows, "names": names, "misses": misses}


def summarise(name: str, runs: list[dict]) -> Result:
    succ = [float(np.mean(r["r"])) for r in runs]
    wins = sum(float(np.sum(r["r"])) for r in runs)
    cost = sum(float(np.sum(r["cost"])) for r in runs)
    single = [float(np.max(np.sum(r["per_worker"], axis=0)) - np.sum(r["r"])) for r in runs]
    agents = [a for r in runs for a in r["agent"]]
    # Every worker that held a slot (an empty slot's placeholder name "-" is not one).
    seen = dict.fromkeys(n for n in [*runs[0]["names"], *agents] if n is not None and n != "-")
    share = {n: agents.count(n) / len(agents) for n in seen}
    out = Result(
        router=name,
        success=float(np.mean(succ)),
        cost_per_correct=cost / max(wins, 1.0),
        latency_s=float(np.mean([np.mean(r["lat"]) for r in runs])),
        regret=float(np.mean([np.sum(r["regret"]) for r in runs])),
        regret_vs_single=float(np.mean(single)),
        share=share,
    )
    shock = shock_step(runs[0])
    if shock is not None:
        out.shock = shock
        out.pre = float(np.mean([np.mean(r["r"][:shock]) for r in runs]))
        out.post = float(np.mean([np.mean(r["r"][shock:]) for r in runs]))
        out.post_regret = float(np.mean([np.sum(r["regret"][shock:]) for r in runs]))
        out.recovery = [recovery_time(np.asarray(r["r"]), shock) for r in runs]
        joiner = joined(runs[0])
        if joiner is not None:
            out.adoption = [adoption_time(r["agent"], shock, joiner) for r in runs]
    return out


def joined(run: dict) -> str | None:
    """The worker a ``join`` event of the stream added, if any."""
    for events in run["events"]:
        for e in events:
            if e.startswith("join: "):
                return e.removeprefix("join: ").split(" (slot")[0]
    return None


def adoption_time(chosen: list, shock: int, worker: str, window: int = 50, share: float = 0.5) -> int | None:
    """Steps after ``shock`` until ``worker`` gets at least ``share`` of the next ``window`` decisions."""
    used = np.array([a == worker for a in chosen[shock:]], dtype=float)
    for t in range(len(used) - window + 1):
        if used[t : t + window].mean() >= share:
            return t
    return None


def shock_step(run: dict) -> int | None:
    """The index of the first decision after the first shock event of a replayed stream, if any."""
    for t, events in enumerate(run["events"]):
        if any(e.startswith(("shock:", "join:", "unavailable:")) for e in events):
            return t + 1
    return None


def _fmt_times(values: list[int | None]) -> str:
    done = [v for v in values if v is not None]
    median = f"{float(np.median(done)):g}" if done else "—"
    return f"{median} ({len(done)}/{len(values)})"


def markdown(results: list[Result], seeds: int, steps: int, note: str = "") -> str:
    names = list(dict.fromkeys(n for r in results for n in r.share))
    shocked = any(r.shock is not None for r in results)
    head = "| router | success | cost / correct | latency s | cum. regret vs per-instance best | regret vs best single worker |"
    sep = "|---|---|---|---|---|---|"
    if shocked:
        head += (
            " success pre → post shock | regret after the shock | recovery steps, median (recovered/seeds) |"
            " steps to give a joiner half the work |"
        )
        sep += "---|---|---|---|"
    out = [
        f"**real pool** ({seeds} seeds x {steps} decisions, replayed from the cache; {note})",
        "",
        head + " " + " | ".join(f"share {n}" for n in names) + " |",
        sep + "---|" * len(names),
    ]
    for r in results:
        line = (
            f"| {r.router} | {r.success:.3f} | {r.cost_per_correct:.3f} | {r.latency_s:.2f} | {r.regret:.1f} | "
            f"{r.regret_vs_single:.1f} |"
        )
        if shocked:
            if r.shock is None:
                line += " — | — | — | — |"
            else:
                adopt = _fmt_times(r.adoption) if r.adoption else "—"
                line += f" {r.pre:.3f} → {r.post:.3f} | {r.post_regret:.1f} | {_fmt_times(r.recovery)} | {adopt} |"
        out.append(line + " " + " | ".join(f"{r.share.get(n, 0.0):.2f}" for n in names) + " |")
    return "\n".join(out) + "\n"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--target",
        help="the target model folder or zoo:NAME (default $LYNN_LM_TARGET, else the zoo's zoo:evm-lm)",
    )
    parser.add_argument(
        "--draft", help="its draft model folder (default $LYNN_LM_DRAFT; without one: no lm-draft, lm-mars)"
    )
    parser.add_argument(
        "--workers",
        help="comma-separated subset of lm-target,lm-draft,lm-mars,lm-sampler,oracle,openai (default all)",
    )
    parser.add_argument(
        "--llm-url", help="an OpenAI-compatible endpoint, http://HOST:PORT/v1 (worker openai)"
    )
    parser.add_argument("--llm-model", help="the endpoint's model name")
    parser.add_argument(
        "--oracle-failure", type=float, default=0.3, help="injected failure rate of the oracle"
    )
    parser.add_argument("--cache", default="results/coordination/real_pool_cache.jsonl")
    parser.add_argument("--categories", help="comma-separated EVMQuest categories (default all)")
    parser.add_argument("--tasks-per-category", type=int, default=1)
    parser.add_argument(
        "--liveweb", type=int, default=0, help="LiveWeb test families mixed into the stream (0: none)"
    )
    parser.add_argument("--web-target", help="the LM workers' model on LiveWeb (default: --target's)")
    parser.add_argument("--web-draft", help="the draft-based workers' draft on LiveWeb")
    parser.add_argument("--stream-seeds", type=int, default=3, help="instances per task in the stream")
    parser.add_argument("--seeds", type=int, default=5, help="seeded replayed streams per router")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--votes", type=int, default=1)
    parser.add_argument(
        "--cost-weight",
        type=float,
        default=0.2,
        help="reward = success - w * cost / max worker cost per call",
    )
    parser.add_argument(
        "--shock", help='one shock as JSON, e.g. \'{"step": 500, "kind": "kill", "worker": "oracle-f30"}\''
    )
    parser.add_argument(
        "--routers", help="comma-separated substrings: only the routers whose name contains one"
    )
    parser.add_argument("--no-singles", action="store_true", help="leave out the single-worker rows")
    parser.add_argument(
        "--fill-threads", type=int, help="workers filling the cache at once (default: all of them)"
    )
    parser.add_argument(
        "--standby",
        action="store_true",
        help="instead: the simulated standby-shock recovery on realised and on expected success",
    )
    parser.add_argument("--out", default="results/bench/coordination_real")


def main(argv: list[str] | None = None) -> int:
    from lynn.bench import main as bench_main

    return bench_main(__name__, argv)


def run(args: argparse.Namespace) -> int:
    from lynn import zoo

    for p in (args.target, args.draft, args.web_target, args.web_draft):
        if p is not None and not Path(zoo.resolve(p)).exists():
            raise UsageError(
                f"model folder {p!r} not found; pass --target/--draft (train with `lynn train lm`)"
            )
    if args.llm_url and not args.llm_model:
        raise UsageError("--llm-url needs --llm-model (the endpoint's model name)")
    if args.seeds < 1 or args.steps < 1 or args.votes < 1:
        raise UsageError("--seeds, --steps and --votes must be at least 1")
    if args.standby:
        return run_standby(args)
    kw = scenario_kwargs(args)
    env = CoordinationEnv(scenario="real-pool", scenario_kwargs=kw, votes=args.votes)
    seconds, runs = fill(env, args.votes, args.fill_threads)
    env.reset(seed=0)
    env.close()
    print(f"fill: {runs} new executions in {seconds:.0f} s (cache {args.cache})", flush=True)
    n_slots = env.n_slots
    routers = pick(ROUTERS, args.routers)
    if not args.no_singles:
        for slot, name in enumerate(env.pool.names()):
            routers[f"single: {name}"] = lambda e, s=slot: FixedWorker(e, s)
    results = []
    start = time.perf_counter()
    for name, make in routers.items():
        runs_ = [
            replay(make, kw, args.steps, seed, args.votes, args.cost_weight) for seed in range(args.seeds)
        ]
        assert all(r["misses"] == 0 for r in runs_), (
            "a replayed stream ran a worker: the fill missed something"
        )
        results.append(summarise(name, runs_))
        print(f"  {name:44s} success {results[-1].success:.3f}", flush=True)
    note = f"votes={args.votes}, cost_weight={args.cost_weight}" + (
        f", shock {args.shock}" if args.shock else ""
    )
    table = markdown(results, args.seeds, args.steps, note)
    del n_slots
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cards = env.scenario.cards
    card_lines = ["", "cards (calibration success per category, smoothed):", ""]
    for w, card in cards.items():
        card_lines.append(f"- {w}: " + ", ".join(f"{c} {v:.2f}" for c, v in card.items()))
    text = (
        table
        + "\n".join(card_lines)
        + f"\n\nfill {seconds:.0f} s for {runs} executions; replay {time.perf_counter() - start:.0f} s\n"
    )
    (out / "coordination_real.md").write_text(text)
    (out / "coordination_real.json").write_text(json.dumps([r.__dict__ for r in results], indent=1))
    print(text)
    return 0


def pick(routers: dict[str, Callable[[gym.Env], Agent]], wanted: str | None) -> dict:
    """The routers whose name contains one of the comma-separated ``wanted`` substrings (all if none)."""
    if not wanted:
        return dict(routers)
    keys = [w.strip() for w in wanted.split(",") if w.strip()]
    out = {k: v for k, v in routers.items() if any(w in k for w in keys)}
    if not out:
        raise UsageError(f"--routers {wanted!r} matches none of {list(routers)}")
    return out


# --- the simulated standby recovery, on realised and on expected success -----------------------
def standby_stream(make: Callable[[gym.Env], Agent], seed: int, steps: int) -> dict[str, Any]:
    """One ``standby-shock`` stream: per step the realised success (0/1) and the expected one.

    The expected success is the hidden success probability of the chosen worker on that subtask
    (``info["expected_success"]``: the env knows the rates, including load timeouts); it is the
    same stream as the realised one, without the Bernoulli draw.
    """
    env = CoordinationEnv(scenario="standby-shock")
    agent = make(env)
    obs, info = env.reset(seed=seed)
    agent.reset(seed=seed)
    realised, expected, regret = np.zeros(steps), np.zeros(steps), np.zeros(steps)
    for t in range(steps):
        action = agent.act(obs, info)
        obs, reward, terminated, truncated, info = env.step(action)
        agent.observe(action, reward, obs, terminated, truncated, info)
        realised[t], expected[t], regret[t] = reward, info["expected_success"], info["regret"]
    close = getattr(agent, "close", None)
    if close is not None:
        close()
    shock = env.scenario.shock_at
    env.close()
    return {"realised": realised, "expected": expected, "regret": regret, "shock": shock}


STANDBY_ROUTERS = (
    "linucb (ours)",
    "linucb no-screening (ours)",
    "linucb no change-detection (ours)",
    "thompson (ours)",
    "mabwiser LinUCB α=1",
    "vw cb_explore_adf squarecb",
    "vw cb_explore_adf ε=0.05",
    "oracle (privileged, best worker per instance)",
)


def run_standby(args: argparse.Namespace) -> int:
    """Recovery steps on ``standby-shock`` measured on realised and on expected success, same streams."""
    routers = pick({k: ROUTERS[k] for k in STANDBY_ROUTERS}, args.routers)
    lines = [
        f"**standby-shock recovery** ({args.seeds} seeds x {args.steps} steps; env seeds 0–{args.seeds - 1}, "
        "the same streams for both measures)",
        "",
        "| router | cum. regret (± sd) | success pre → post (realised) | recovery on realised success, median (recovered/seeds) | "
        "expected success pre → post | recovery on expected success, median (recovered/seeds) | per seed (expected) |",
        "|---|---|---|---|---|---|---|",
    ]
    summary = {}
    for name, make in routers.items():
        runs = [standby_stream(make, seed, args.steps) for seed in range(args.seeds)]
        shock = runs[0]["shock"]
        rec = {m: [recovery_time(r[m], shock) for r in runs] for m in ("realised", "expected")}
        pre = {m: float(np.mean([r[m][:shock].mean() for r in runs])) for m in rec}
        post = {m: float(np.mean([r[m][shock:].mean() for r in runs])) for m in rec}
        regrets = [float(r["regret"].sum()) for r in runs]
        reg = f"{np.mean(regrets):.1f} ± {np.std(regrets, ddof=1) if len(regrets) > 1 else 0.0:.1f}"
        summary[name] = {"recovery": rec, "pre": pre, "post": post, "regret": regrets}
        per_seed = ", ".join("—" if v is None else str(v) for v in rec["expected"])
        lines.append(
            f"| {name} | {reg} | {pre['realised']:.3f} → {post['realised']:.3f} | {_fmt_times(rec['realised'])} | "
            f"{pre['expected']:.3f} → {post['expected']:.3f} | {_fmt_times(rec['expected'])} | {per_seed} |"
        )
        print(
            f"  {name:44s} recovery realised {_fmt_times(rec['realised'])}, expected {_fmt_times(rec['expected'])}",
            flush=True,
        )
    text = "\n".join(lines) + "\n"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "standby_recovery.md").write_text(text)
    (out / "standby_recovery.json").write_text(json.dumps(summary, indent=1))
    print(text)
    return 0
