"""The routing benchmark: our routers against MABWiser's LinUCB and Vowpal Wabbit's ``--cb_explore_adf``.

Every router runs on the same seeded streams (same scenario, same env seed), and we record per step
the regret, the settled reward, the chosen worker and its cost. From those come cumulative regret,
success before/after the shock, recovery time (rolling-50 success back to 0.9x the pre-shock level
and held for 50 steps), the time to stop routing to the shocked worker, cost per correct answer, and
decisions per second (the router's own ``act`` + ``observe`` time, env excluded).

Run: ``lynn bench coordination`` or ``.venv/bin/python benchmarks/bench_coordination.py`` (same
flags). MABWiser and Vowpal Wabbit are imported only here (extra ``coordination``).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from lynn.agents import Agent
from lynn.agents.bandits import (
    EpsilonGreedyAgent,
    OracleRouter,
    RoundRobinAgent,
    StaticRuleAgent,
    ThompsonAgent,
)
from lynn.agents.linucb import DelayedUpdates, LinUCBAgent, candidates
from lynn.agents.random_agent import RandomAgent
from lynn.bench import pyplot, save_figure
from lynn.envs.coordination.coordination_env import CoordinationEnv
from lynn.envs.coordination.metrics import loglog_slope, recovery_time
from lynn.errors import UsageError


# --- library adapters -------------------------------------------------------------------------
class MABWiserLinUCB(Agent):
    """MABWiser's ``LearningPolicy.LinUCB`` (one ridge model per arm) on the flattened observation.

    MABWiser's LinUCB takes one context per decision, so the context is everything the env shows:
    the candidate matrix and the subtask features. Unavailable arms are skipped at prediction.
    """

    name = "mabwiser-linucb"

    def __init__(self, env: gym.Env, alpha: float = 1.0, l2_lambda: float = 1.0) -> None:
        super().__init__(env)
        self.alpha, self.l2_lambda = alpha, l2_lambda
        self.arms = list(range(env.action_space.n))

    def reset(self, seed: int | None = None) -> None:
        from mabwiser.mab import MAB, LearningPolicy

        self.mab = MAB(
            arms=self.arms,
            learning_policy=LearningPolicy.LinUCB(alpha=self.alpha, l2_lambda=self.l2_lambda),
            seed=seed or 0,
        )
        self.fitted = False
        self.rng = np.random.default_rng(seed)
        self.delayed = DelayedUpdates()

    def act(self, obs: dict[str, np.ndarray], info: dict[str, Any]) -> int:
        ctx = np.concatenate([np.ravel(obs["candidates"]), obs["subtask"]]).astype(np.float64)
        idx = candidates(obs)
        if self.fitted:
            scores = self.mab.predict_expectations(ctx[None, :])
            slot = int(idx[int(np.argmax([scores[int(i)] for i in idx]))])
        else:
            slot = int(self.rng.choice(idx))
        self.delayed.chose(slot, ctx)
        return slot

    def observe(
        self, action: Any, reward: float, next_obs: Any, terminated: bool, truncated: bool, info: dict
    ) -> None:
        settled = self.delayed.settle(reward, info)
        if not settled:
            return
        decisions = [s for s, _, _ in settled]
        contexts = np.array([x for _, x, _ in settled])
        rewards = [r for _, _, r in settled]
        if self.fitted:
            self.mab.partial_fit(decisions, rewards, contexts)
        else:
            self.mab.fit(decisions, rewards, contexts)
            self.fitted = True


class VWCbExploreAdf(Agent):
    """Vowpal Wabbit ``--cb_explore_adf`` with shared (subtask) and per-action (worker) features.

    Each available worker is one action line carrying its id and its candidate features; the shared
    line carries the subtask type and difficulty; ``-q sa`` crosses them. The action is sampled from
    VW's PMF and the learned label is ``action:cost:probability`` with cost = -reward.
    """

    name = "vw-cb-adf"

    def __init__(self, env: gym.Env, args: str = "--cb_explore_adf --epsilon 0.05 -q sa") -> None:
        super().__init__(env)
        self.args = args
        self.ws: Any = None

    def reset(self, seed: int | None = None) -> None:
        import vowpalwabbit

        if self.ws is not None:
            self.ws.finish()
        self.ws = vowpalwabbit.Workspace(f"{self.args} --quiet --random_seed {seed or 0}")
        self.rng = np.random.default_rng(seed)
        self.delayed = DelayedUpdates()

    def act(self, obs: dict[str, np.ndarray], info: dict[str, Any]) -> int:
        idx = candidates(obs)
        sub = obs["subtask"]
        shared = f"shared |s type={int(np.argmax(sub[:-1]))} hard:{sub[-1]:.0f}"
        x = obs["candidates"]
        lines = [
            f"|a id={int(i)} sim:{x[i, 1]:.4f} load:{x[i, 2]:.4f} lat:{x[i, 3]:.4f} prior:{x[i, 4]:.4f}"
            for i in idx
        ]
        pmf = np.asarray(self.ws.predict([shared, *lines]), dtype=float)
        pmf = pmf / pmf.sum()
        k = int(self.rng.choice(len(idx), p=pmf))
        # The "features" filed for this decision are the VW example itself, learned when settled.
        self.delayed.chose(int(idx[k]), (shared, lines, k, float(pmf[k])))  # type: ignore[arg-type]
        return int(idx[k])

    def observe(
        self, action: Any, reward: float, next_obs: Any, terminated: bool, truncated: bool, info: dict
    ) -> None:
        for _, (shared, lines, k, p), r in self.delayed.settle(reward, info):
            labelled = list(lines)
            labelled[k] = f"0:{-r}:{p} {lines[k]}"
            self.ws.learn([shared, *labelled])

    def close(self) -> None:
        if self.ws is not None:
            self.ws.finish()
            self.ws = None

    def __del__(self) -> None:
        self.close()


# --- runs -------------------------------------------------------------------------------------
ROUTERS: dict[str, Callable[[gym.Env], Agent]] = {
    "linucb (ours)": lambda env: LinUCBAgent(env),
    "linucb α=1 S=1 (ours, reference radius)": lambda env: LinUCBAgent(env, alpha=1.0, S=1.0),
    # Symphony-Coord's own router: GlobalLinUCB's defaults, build_x's feature map, no change detector.
    "linucb reference (Symphony-Coord: α=1 S=1, build_x)": lambda env: LinUCBAgent(
        env, alpha=1.0, S=1.0, features="reference", change_detect=False
    ),
    "linucb no-screening (ours)": lambda env: LinUCBAgent(env, screening=False),
    "linucb-disjoint (ours)": lambda env: LinUCBAgent(env, disjoint=True),
    "thompson (ours)": lambda env: ThompsonAgent(env),
    "epsilon-greedy (ours)": lambda env: EpsilonGreedyAgent(env),
    "mabwiser LinUCB α=1": lambda env: MABWiserLinUCB(env, alpha=1.0),
    "mabwiser LinUCB α=0.1": lambda env: MABWiserLinUCB(env, alpha=0.1),
    "vw cb_explore_adf ε=0.05": lambda env: VWCbExploreAdf(env),
    "vw cb_explore_adf squarecb": lambda env: VWCbExploreAdf(env, "--cb_explore_adf --squarecb -q sa"),
    "static": lambda env: StaticRuleAgent(env),
    "round-robin": lambda env: RoundRobinAgent(env),
    "random": lambda env: RandomAgent(env),
    "oracle (privileged)": lambda env: OracleRouter(env),
}
LIBRARIES = (
    "mabwiser LinUCB α=1",
    "mabwiser LinUCB α=0.1",
    "vw cb_explore_adf ε=0.05",
    "vw cb_explore_adf squarecb",
)
OURS = "linucb (ours)"


@dataclass
class Run:
    """Per-step traces of one router on one seeded stream."""

    regret: np.ndarray
    reward: np.ndarray
    cost: np.ndarray
    chosen: np.ndarray
    seconds: float
    shock: int | None = None


def run_router(make: Callable[[gym.Env], Agent], scenario: str, steps: int, seed: int) -> Run:
    """Run one router for ``steps`` decisions on ``scenario`` with env seed ``seed``."""
    env = CoordinationEnv(scenario=scenario)
    agent = make(env)
    obs, info = env.reset(seed=seed)
    agent.reset(seed=seed)
    regret, reward, cost = np.zeros(steps), np.zeros(steps), np.zeros(steps)
    chosen = []
    spent = 0.0
    for t in range(steps):
        start = time.perf_counter()
        action = agent.act(obs, info)
        spent += time.perf_counter() - start
        obs, r, terminated, truncated, info = env.step(action)
        start = time.perf_counter()
        agent.observe(action, r, obs, terminated, truncated, info)
        spent += time.perf_counter() - start
        regret[t], reward[t], cost[t] = info["regret"], r, info["cost"]
        chosen.append(info["agent"] or "")
    close = getattr(agent, "close", None)
    if close is not None:
        close()
    env.close()
    return Run(regret, reward, cost, np.array(chosen), spent, env.scenario.shock_at)


def record_stream(scenario: str, steps: int, seed: int = 0) -> list[tuple[Any, dict, Any, dict]]:
    """A fixed stream of ``(obs, info, next_obs, next_info)`` to replay through routers for timing.

    Decision ids advance by one per step whatever the action, so any router's delayed updates
    match the recorded feedback pairs.
    """
    env = CoordinationEnv(scenario=scenario)
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    stream = []
    for _ in range(steps):
        action = int(rng.choice(candidates(obs)))
        next_obs, _, _, _, next_info = env.step(action)
        stream.append((obs, info, next_obs, next_info))
        obs, info = next_obs, next_info
    return stream


def decisions_per_second(
    routers: dict[str, Callable[[gym.Env], Agent]],
    scenario: str = "symphony-shock",
    steps: int = 2000,
    rounds: int = 3,
) -> dict[str, float]:
    """Each router's ``act`` + ``observe`` throughput on one replayed stream; best of ``rounds``.

    Routers take turns within each round so that a busy machine slows them alike, and the best
    round is kept because interference only ever adds time.
    """
    stream = record_stream(scenario, steps)
    env = CoordinationEnv(scenario=scenario)
    best = dict.fromkeys(routers, 0.0)
    for _ in range(rounds):
        for name, make in routers.items():
            agent = make(env)
            agent.reset(seed=0)
            start = time.perf_counter()
            for obs, info, next_obs, next_info in stream:
                action = agent.act(obs, info)
                agent.observe(action, 0.0, next_obs, False, False, next_info)
            best[name] = max(best[name], steps / (time.perf_counter() - start))
            close = getattr(agent, "close", None)
            if close is not None:
                close()
    return best


def abandon_time(
    chosen: np.ndarray, shock: int, worker: str = "A", window: int = 50, share: float = 0.1
) -> int | None:
    """Steps after ``shock`` until ``worker`` gets at most ``share`` of the next ``window`` decisions."""
    used = (chosen[shock:] == worker).astype(float)
    for t in range(len(used) - window + 1):
        if used[t : t + window].mean() <= share:
            return t
    return None


@dataclass
class Row:
    """Aggregated results of one router on one scenario (means over seeds)."""

    router: str
    scenario: str
    regret: float
    regret_sd: float
    slope: float
    success: float
    cost_per_correct: float
    decisions_per_s: float
    pre: float | None = None
    post: float | None = None
    recovery: list[int | None] = field(default_factory=list)
    abandon: list[int | None] = field(default_factory=list)
    curve: np.ndarray | None = None


def summarise(router: str, scenario: str, runs: list[Run]) -> Row:
    cum = np.array([np.cumsum(r.regret) for r in runs])
    success = np.array([r.reward.mean() for r in runs])
    wins = sum(float(r.reward.sum()) for r in runs)
    row = Row(
        router=router,
        scenario=scenario,
        regret=float(cum[:, -1].mean()),
        regret_sd=float(cum[:, -1].std(ddof=1)) if len(runs) > 1 else 0.0,
        slope=float(np.mean([loglog_slope(c) for c in cum])),
        success=float(success.mean()),
        cost_per_correct=sum(float(r.cost.sum()) for r in runs) / max(wins, 1.0),
        decisions_per_s=sum(len(r.regret) for r in runs) / max(sum(r.seconds for r in runs), 1e-9),
        curve=cum.mean(axis=0),
    )
    shock = runs[0].shock
    if shock is not None and shock < len(runs[0].reward):
        row.pre = float(np.mean([r.reward[:shock].mean() for r in runs]))
        row.post = float(np.mean([r.reward[shock:].mean() for r in runs]))
        row.recovery = [recovery_time(r.reward, shock) for r in runs]
        row.abandon = [abandon_time(r.chosen, shock) for r in runs]
    return row


def run_benchmark(
    scenarios: dict[str, int],
    seeds: int,
    routers: dict[str, Callable[[gym.Env], Agent]],
    progress: bool = True,
) -> list[Row]:
    """Every router on every scenario (``name -> steps``) over ``seeds`` seeded streams."""
    rows = []
    for scenario, steps in scenarios.items():
        for name, make in routers.items():
            runs = [run_router(make, scenario, steps, seed) for seed in range(seeds)]
            rows.append(summarise(name, scenario, runs))
            if progress:
                print(f"  {scenario:28s} {name:36s} regret {rows[-1].regret:8.1f}", flush=True)
    return rows


# --- reports ----------------------------------------------------------------------------------
def _fmt_times(values: list[int | None]) -> str:
    if not values:
        return ""
    done = [v for v in values if v is not None]
    median = f"{int(np.median(done))}" if done else "—"
    return f"{median} ({len(done)}/{len(values)})"


def markdown(rows: list[Row], seeds: int) -> str:
    """The results table(s) in Markdown."""
    out = []
    for scenario in dict.fromkeys(r.scenario for r in rows):
        sub = [r for r in rows if r.scenario == scenario]
        shock = sub[0].pre is not None
        head = "| router | cum. regret (± sd) | log-log slope | success | cost / correct |"
        sep = "|---|---|---|---|---|"
        if shock:
            head += " success pre → post shock | recovery steps (recovered/seeds) | steps to drop A |"
            sep += "---|---|---|"
        out += [f"**{scenario}** ({seeds} seeds)", "", head, sep]
        for r in sub:
            line = (
                f"| {r.router} | {r.regret:.1f} ± {r.regret_sd:.1f} | {r.slope:.2f} | {r.success:.3f} | "
                f"{r.cost_per_correct:.3f} |"
            )
            if shock:
                line += f" {r.pre:.3f} → {r.post:.3f} | {_fmt_times(r.recovery)} | {_fmt_times(r.abandon)} |"
            out.append(line)
        out.append("")
    return "\n".join(out)


def speed_markdown(speed: dict[str, float], steps: int) -> str:
    """The decisions/s table (replayed stream), with the ratio to MABWiser's LinUCB."""
    mab = max((v for k, v in speed.items() if k.startswith("mabwiser")), default=None)
    out = [
        f"**decisions per second** (act + observe on one replayed {steps}-step symphony-shock stream, best of 3)",
        "",
        "| router | decisions/s | vs MABWiser LinUCB |",
        "|---|---|---|",
    ]
    for name, value in speed.items():
        ratio = f"{value / mab:.1f}x" if mab else "—"
        out.append(f"| {name} | {value:,.0f} | {ratio} |")
    return "\n".join(out) + "\n"


def ratios(rows: list[Row], speed: dict[str, float]) -> list[str]:
    """The goal lines: ours against the best library per scenario, recovery, speed against MABWiser."""
    lines = []
    for scenario in dict.fromkeys(r.scenario for r in rows):
        sub = {r.router: r for r in rows if r.scenario == scenario}
        if OURS not in sub:
            continue
        libs = [sub[name] for name in LIBRARIES if name in sub]
        ours = sub[OURS]
        if libs:
            best = min(libs, key=lambda r: r.regret)
            verdict = "met" if ours.regret <= best.regret else "NOT met"
            lines.append(
                f"{scenario}: regret ours {ours.regret:.1f} vs best library ({best.router}) {best.regret:.1f} "
                f"-> ratio {ours.regret / max(best.regret, 1e-9):.2f} ({verdict})"
            )
        if ours.recovery:
            done = [v for v in ours.recovery if v is not None]
            ok = bool(done) and len(done) == len(ours.recovery) and np.median(done) <= 50
            oracle = sub.get("oracle (privileged)")
            ref = f"; oracle {_fmt_times(oracle.recovery)}" if oracle is not None else ""
            lines.append(
                f"{scenario}: recovery steps ours {_fmt_times(ours.recovery)}{ref} ({'met' if ok else 'NOT met'}, goal <= 50)"
            )
    mab = max((v for k, v in speed.items() if k.startswith("mabwiser")), default=None)
    if mab and OURS in speed:
        ratio = speed[OURS] / mab
        lines.append(
            f"decisions/s ours {speed[OURS]:,.0f} vs MABWiser {mab:,.0f} -> {ratio:.1f}x "
            f"({'met' if ratio >= 5 else 'NOT met'}, goal >= 5x)"
        )
    return lines


def plot(rows: list[Row], path: Path) -> None:
    """Mean cumulative regret curves, one panel per scenario (three per row), one shared legend."""
    plt = pyplot()
    scenarios = list(dict.fromkeys(r.scenario for r in rows))
    routers = [name for name in dict.fromkeys(r.router for r in rows) if not name.startswith("oracle")]
    colours = {name: plt.get_cmap("tab20")(i % 20) for i, name in enumerate(routers)}
    ncols = min(3, len(scenarios))
    nrows = -(-len(scenarios) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.2 * ncols, 3.8 * nrows), squeeze=False)
    for ax, scenario in zip(axes.flat, scenarios, strict=False):
        for r in rows:
            if r.scenario != scenario or r.curve is None or r.router not in colours:
                continue
            style = "-" if "ours" in r.router else ("--" if r.router in LIBRARIES else ":")
            width = 2.4 if r.router == OURS else 1.2
            ax.plot(np.arange(1, len(r.curve) + 1), r.curve, style, color=colours[r.router], linewidth=width)
        shocked = next((x for x in rows if x.scenario == scenario and x.pre is not None), None)
        if shocked is not None and shocked.curve is not None:
            ax.axvline(len(shocked.curve) // 2, color="red", linestyle=":", linewidth=1)
        ax.set_title(scenario)
        ax.set_xlabel("decision")
        ax.set_ylabel("cumulative regret")
        ax.set_yscale("symlog", linthresh=10)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(scenarios) :]:
        ax.axis("off")
    handles = [
        plt.Line2D(
            [], [], color=colours[n], linestyle="-" if "ours" in n else ("--" if n in LIBRARIES else ":")
        )
        for n in routers
    ]
    fig.legend(handles, routers, loc="lower center", ncol=min(4, len(routers)), fontsize=8, frameon=False)
    save_figure(fig, path, dpi=110, rect=(0, 0.12 if nrows > 1 else 0.2, 1, 1))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The benchmark's flags (shared by ``lynn bench coordination`` and the benchmarks/ script)."""
    parser.add_argument("--seeds", type=int, default=3, help="seeded streams per scenario")
    parser.add_argument("--steps", type=int, default=1000, help="decisions per stream (stationary: 2x)")
    parser.add_argument(
        "--scenarios", default="stationary,symphony-shock,symphony-shock-unavailable,drift,churn"
    )
    parser.add_argument("--speed-steps", type=int, default=2000, help="replayed decisions for decisions/s")
    parser.add_argument("--routers", help="comma-separated subset of the router labels (substring match)")
    parser.add_argument("--out", default="results/bench/coordination", help="where the PNG and tables go")
    parser.add_argument("--quiet", action="store_true", help="no per-run progress lines")


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` like ``lynn bench coordination`` and run the benchmark."""
    from lynn.bench import main as bench_main

    return bench_main(__name__, argv)


def run(args: argparse.Namespace) -> int:
    """Run the benchmark with parsed flags: print the tables and write the report under ``--out``."""
    from lynn.envs.coordination.scenarios import SCENARIOS

    unknown = [s for s in args.scenarios.split(",") if s not in SCENARIOS]
    if unknown:
        raise UsageError(f"unknown scenario(s) {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}")
    if args.seeds < 1 or args.steps < 1 or args.speed_steps < 1:
        raise UsageError("--seeds, --steps and --speed-steps must be at least 1")
    scenarios = {}
    for name in args.scenarios.split(","):
        # The stationary stream runs longer so that the regret's growth rate (log-log slope) shows.
        scenarios[name] = args.steps * (2 if name == "stationary" else 1)
    routers = ROUTERS
    if args.routers:
        wanted = [w.strip() for w in args.routers.split(",")]
        routers = {k: v for k, v in ROUTERS.items() if any(w in k for w in wanted)}
    start = time.perf_counter()
    rows = run_benchmark(scenarios, args.seeds, routers, progress=not args.quiet)
    speed_steps = args.speed_steps
    # The oracle reads the live env's hidden state, which a replayed stream does not have.
    timed = {k: v for k, v in routers.items() if not k.startswith("oracle")}
    speed = decisions_per_second(timed, steps=speed_steps)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    table = markdown(rows, args.seeds) + "\n" + speed_markdown(speed, speed_steps)
    goal_lines = ratios(rows, speed)
    (out / "coordination.md").write_text(table + "\n" + "\n".join(f"- {g}" for g in goal_lines) + "\n")
    plot(rows, out / "coordination_regret.png")
    (out / "coordination.json").write_text(
        json.dumps(
            [{k: v for k, v in r.__dict__.items() if k != "curve"} for r in rows],
            indent=1,
        )
    )
    print(table)
    print("\n".join(goal_lines))
    print(
        f"wrote {out / 'coordination.md'}, {out / 'coordination_regret.png'} in {time.perf_counter() - start:.0f} s"
    )
    return 0
