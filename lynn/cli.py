"""The ``lynn`` command: envs, tasks, eval, suite, leaderboard, doctor, bench (+ env-specific commands).

User mistakes (unknown env, agent, task; bad flags) print one ``lynn: error: ...`` line and exit 2; a
reader that closes the pipe early (``lynn tasks ... --json | head``) ends the command quietly.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lynn.config_flags import FlagError, add_config_flags, config_from_args
from lynn.errors import UsageError

__all__ = ["COMMANDS", "UsageError", "build_parser", "config_from_args", "main"]

# Commands that live beside their code: (parent command, "module:function"), the function adding its
# command(s) to the parent's subparsers ("": the top level). Those modules import lynn.errors (never this
# module), build their flags from their config dataclass (lynn.config_flags) and import heavy modules
# inside the command. Adding a command is one line here.
COMMANDS: list[tuple[str, str]] = [
    ("", "lynn.bench:register"),  # lynn bench NAME (the table is lynn.bench.BENCHES)
    ("", "lynn.envs.liveweb.cli:register"),  # lynn sites serve
    ("train", "lynn.envs.worldmodel.train:add_train_parsers"),  # lynn train world-model / reward-model
    ("train", "lynn.agents.dynaweb.train:add_train_parser"),  # lynn train dynaweb
]


def _parse_kv(pairs: Sequence[str] | None, flag: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"{flag} expects KEY=VALUE, got {pair!r}")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


def cmd_envs(args: argparse.Namespace) -> int:
    from lynn.registry import ENTRIES

    if args.json:
        print(json.dumps([{"id": e.id, "description": e.description} for e in ENTRIES]))
        return 0
    if not ENTRIES:
        print("no envs registered")
    width = max((len(e.id) for e in ENTRIES), default=0)
    for e in ENTRIES:
        print(f"{e.id:<{width}}  {e.description}")
    return 0


def cmd_tasks(args: argparse.Namespace) -> int:
    from lynn.eval.runner import list_tasks

    tasks = list_tasks(args.env_id, args.split, **_parse_kv(args.env_arg, "--env-arg"))
    if args.json:
        print(json.dumps(tasks))
        return 0
    for t in tasks:
        desc = t.get("description") or t.get("intent") or ""
        print(f"{t['task_id']}\t{t.get('split') or ''}\t{desc}")
    print(f"{len(tasks)} tasks", file=sys.stderr)
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from lynn.eval.runner import EvalConfig, evaluate

    cfg = config_from_args(EvalConfig, args)
    summary = evaluate(cfg)
    if args.json:
        print(json.dumps(summary, sort_keys=True))
    else:
        low, high = summary["success_wilson95"]
        extra = "".join(
            f", {name} {summary[key]:{fmt}}"
            for key, name, fmt in (("mean_score", "score", ".3f"), ("mean_regret", "regret", ".2f"))
            if key in summary
        )
        print(
            f"{summary['env_id']} · {summary['label']}: {summary['episodes']} episodes, "
            f"success {summary['successes']}/{summary['episodes']} = {summary['success_rate']:.1%} "
            f"(Wilson 95% {low:.1%}–{high:.1%}), "
            f"mean reward {summary['mean_reward']:.3f} ± {summary['reward_ci95']:.3f}{extra} -> {summary['results']}"
        )
    return 0


def _print_rows(rows: list[Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    from lynn.eval.leaderboard import HEADER, table_cells

    # No cell wraps (a wrapped "12/12 = 100.0%" lost its interval to the next line, and long names were cut);
    # the headline's measures go one per line, and the table gets the width it needs.
    table = Table(title="Lynn Gym leaderboard")
    for h in HEADER:
        table.add_column(h, no_wrap=True)
    for cells in table_cells(rows):
        table.add_row(*cells[:4], cells[4].replace(" · ", "\n"), *cells[5:])
    width = max(160, Console(width=10_000).measure(table).maximum)
    Console(width=width).print(table)


def cmd_leaderboard(args: argparse.Namespace) -> int:
    from lynn.eval.leaderboard import write_leaderboard

    if not Path(args.dir).is_dir():
        raise UsageError(f"no results folder {args.dir}")
    rows, paths = write_leaderboard(args.dir, args.html)
    if not rows:
        raise UsageError(f"no episodes.jsonl under {args.dir}; run `lynn eval` first")
    _print_rows(rows)
    print(" ".join(f"{k}: {v}" for k, v in paths.items()))
    return 0


def cmd_suite(args: argparse.Namespace) -> int:
    """The main job (``make run``): every env × its suite agents, then the leaderboard (:mod:`lynn.suite`)."""
    from lynn.suite.run import SuiteConfig, run_suite

    result = run_suite(config_from_args(SuiteConfig, args))
    _print_rows(result["rows"])
    print(" ".join(f"{k}: {v}" for k, v in result["paths"].items()))
    if result["imagined_vs_real"]:
        print(
            "Imagined (Lynn/WebWorldModel-v0) vs real (Lynn/LiveWeb-v0) success, same instances:\n"
            + result["imagined_vs_real"]
        )
    print(f"lynn suite: {result['minutes']:.1f} min")
    return 0


# --- collect / train (LM data and models) -------------------------------------------------------
def cmd_collect(args: argparse.Namespace) -> int:
    from lynn.eval.collect import CollectConfig, collect

    if args.epsilon is not None and not 0 <= args.epsilon <= 1:
        raise UsageError("--epsilon must be in [0, 1]")
    cfg = config_from_args(CollectConfig, args)
    if args.epsilon is not None:  # a shortcut for --agent-arg epsilon=X
        cfg.agent_kwargs = {**cfg.agent_kwargs, "epsilon": args.epsilon}
    r = collect(cfg)
    where = ", ".join(p for p in (r["demos_path"], r["transitions_path"]) if p)
    print(
        f"{r['steps']} steps from {r['episodes']} episodes ({r['successes']} successful), {r['demos']} demos -> {where}"
    )
    return 0


def cmd_train_lm(args: argparse.Namespace) -> int:
    from lynn.lm.train import TrainConfig, train_lm

    cfg = config_from_args(TrainConfig, args)
    transform = None
    if cfg.compact:
        from lynn.envs.evmquest.compact import compact_reply as transform
    summary = train_lm(cfg, reply_transform=transform)
    print(
        json.dumps(summary, sort_keys=True)
        if args.json
        else f"{summary['role']} model ({summary['parameters'] / 1e6:.2f}M params) trained {summary['minutes']:.1f} min, "
        f"final loss {summary['final_loss']:.3f} -> {summary['out']} (loss curve {summary['loss_png']})"
        + (
            f"\n--max-minutes bound at step {summary['steps']} of {summary['planned_steps']}: "
            "rerun with --resume to finish"
            if summary["capped_by_minutes"]
            else ""
        )
    )
    return 0


def cmd_train_grpo(args: argparse.Namespace) -> int:
    from lynn.agents.llm.grpo_config import GRPOTrainConfig
    from lynn.agents.llm.grpo_trainer import train_grpo
    from lynn.suite.heldout import evmquest_heldout

    cfg = config_from_args(GRPOTrainConfig, args)
    s = train_grpo(cfg, evaluate=evmquest_heldout)
    if args.json:
        print(json.dumps({k: v for k, v in s.items() if k != "history"}, sort_keys=True, default=str))
    else:
        hist = " ".join(f"{k}:{v}" for k, v in s.get("staleness_hist", {}).items())
        print(
            f"grpo {cfg.mode}: {s['updates']} updates in {s['wall_s']:.0f}s, utilisation {s['utilisation']:.1%}, "
            f"{s['rollouts_per_s']:.3f} groups/s, reward {s['reward_first5']:.3f} -> {s['reward_last5']:.3f}, "
            f"dropped stale {s['dropped_stale']}, lost {s['lost']}, refused {s['refused']}, staleness [{hist}] "
            f"-> {s['final']} ({s['reward_png']})"
            + (
                f"; stopped by --max-minutes after {s['updates_total']} of {cfg.updates} updates"
                if s.get("capped_by_minutes")
                else ""
            )
        )
    return 0


# --- zoo --------------------------------------------------------------------------------------
def cmd_zoo(args: argparse.Namespace) -> int:
    """``lynn zoo list|verify|add|build``: the shipped models (:mod:`lynn.zoo`)."""
    from lynn import zoo

    if args.zoo_what == "list":
        for card in zoo.cards():
            default = ", ".join(f"{e} {r}" for e, r in card.default_for.items())
            print(
                f"zoo:{card.name:<16} {card.kind:<13} {card.bytes / 1e6:6.2f} MB  {card.description}"
                + (f"  [default: {default}]" if default else "")
            )
        print(f"{zoo.zoo_bytes() / 1e6:.2f} MB of {zoo.BUDGET_BYTES / 1e6:.0f} MB in {zoo.zoo_dir()}")
        return 0
    if args.zoo_what == "verify":
        names = args.names or [c.name for c in zoo.cards()]
        for name in names:
            print(f"ok  zoo:{name}  {zoo.verify(name)}")
        return 0
    if args.zoo_what == "add":
        card: dict[str, Any] = {}
        if (Path(args.path) / "lynn_train.json").exists():  # a `lynn train lm` folder: what it says
            card.update(zoo.card_from_train_summary(args.path))
        if args.card_json:
            card.update(json.loads(Path(args.card_json).read_text()))
        for key in ("kind", "description"):
            if getattr(args, key):
                card[key] = getattr(args, key)
        missing = [k for k in ("kind", "description") if not card.get(k)]
        if missing:
            raise UsageError(f"zoo add: the card needs {missing} (--card-json FILE or --kind/--description)")
        made = zoo.add(args.name, args.path, card, include=args.include)
        print(
            f"zoo:{made.name}: {len(made.files)} files, {made.bytes / 1e6:.2f} MB -> {zoo.zoo_dir() / made.name}"
        )
        return 0
    report = zoo.build(
        args.names or None, data=args.data, out=args.out, install=args.install, dry_run=args.dry_run
    )
    for r in report:
        if args.dry_run:
            print(f"# zoo:{r['name']} -> {r['out']}\n" + "\n".join(r["commands"]))
        else:
            print(f"zoo:{r['name']}: rebuilt in {r['minutes']:.1f} min -> {r['out']}")
    return 0


# --- doctor -----------------------------------------------------------------------------------
PY_DEPS = [
    # (import name, extra that brings it)
    ("gymnasium", "core"),
    ("numpy", "core"),
    ("rich", "core"),
    ("matplotlib", "core"),
    ("torch", "llm"),
    ("transformers", "llm"),
    ("stable_baselines3", "sb3"),
    ("web3", "evm"),
    ("eth_tester", "evm"),
    ("playwright", "web"),
    ("starlette", "web"),
    ("ray", "ray"),
    ("mabwiser", "coordination"),
    ("vowpalwabbit", "coordination"),
    ("pytest", "dev"),
]


def doctor_checks() -> list[tuple[str, bool, str, str]]:
    """(what, ok, detail, command that fixes it) for every piece Lynn can use.

    External programs come from :func:`lynn.system.find_all`: the same lookups the envs use.
    """
    from lynn.system import find_all

    checks = []
    pip = f"{sys.executable} -m pip install"
    for name, extra in PY_DEPS:
        ok = importlib.util.find_spec(name) is not None
        fix = f"{pip} -e '.[{extra}]'" if extra != "core" else f"{pip} -e ."
        if name == "torch":
            fix = f"{pip} torch==2.13.0  # CPU build; an unpinned torch pulls CUDA"
        checks.append((f"python: {name}", ok, "", fix))
    for tool in find_all():
        if tool.ok:
            version = tool.version()
            detail = f"{tool.path} (from {tool.source}{', ' + version if version else ''})"
        else:
            detail = f"{tool.source}; searched {', '.join(tool.searched)}"
        checks.append((tool.name, tool.ok, detail, tool.fix))
    return checks


def cmd_doctor(args: argparse.Namespace) -> int:
    missing = 0
    for what, ok, detail, fix in doctor_checks():
        if ok:
            print(f"ok       {what}" + (f"  {detail}" if detail else ""))
        else:
            print(f"MISSING  {what}\n         fix: {fix}\n         why: {detail}")
        missing += not ok
    print("all good" if not missing else f"{missing} missing; run the fix commands above (or `make test`)")
    return 0 if not missing else 1


# --- parser -----------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lynn", description="Lynn Gym: envs and agents for LLM-agent research"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("envs", help="list registered env ids")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_envs)

    p = sub.add_parser("tasks", help="list an env's tasks")
    p.add_argument("env_id")
    p.add_argument("--split")
    p.add_argument("--json", action="store_true")
    p.add_argument("--env-arg", action="append", metavar="KEY=VALUE")
    p.set_defaults(func=cmd_tasks)

    from lynn.eval.collect import CollectConfig  # light: the commands import what they run
    from lynn.eval.runner import EvalConfig

    p = sub.add_parser("eval", help="evaluate an agent on an env (resumable)")
    add_config_flags(p, EvalConfig)
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    p.set_defaults(func=cmd_eval)

    from lynn.suite.run import SuiteConfig  # light: the job's imports run in the command

    p = sub.add_parser(
        "suite", help="the main job: evaluate the built-in agents on every env, print the leaderboard"
    )
    add_config_flags(p, SuiteConfig)
    p.set_defaults(func=cmd_suite)

    p = sub.add_parser("leaderboard", help="aggregate result folders into Markdown, HTML and PNG")
    p.add_argument("dir")
    p.add_argument("--html", help="where to write the HTML page (default DIR/leaderboard.html)")
    p.set_defaults(func=cmd_leaderboard)

    c = sub.add_parser("collect", help="record demonstrations (chat JSONL) and, for LiveWeb, transitions")
    add_config_flags(c, CollectConfig)
    c.add_argument(
        "--epsilon", type=float, default=None, help="exploration rate passed to the agent (an agent kwarg)"
    )
    c.set_defaults(func=cmd_collect)

    from lynn.agents.llm.grpo_config import GRPOTrainConfig  # light, like every config module
    from lynn.lm.train import TrainConfig

    t = sub.add_parser("train", help="train in-repo models")
    tsub = t.add_subparsers(dest="train_what", required=True, metavar="WHAT")
    lm = tsub.add_parser(
        "lm", help="a causal LM (target) on demonstrations, or a draft distilled from a target"
    )
    add_config_flags(lm, TrainConfig)
    lm.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    lm.set_defaults(func=cmd_train_lm)
    gr = tsub.add_parser(
        "grpo", help="GRPO post-training of a policy LM on EVMQuest (co-located or through Echo)"
    )
    add_config_flags(gr, GRPOTrainConfig)
    gr.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    gr.set_defaults(func=cmd_train_grpo)

    z = sub.add_parser("zoo", help="the shipped models (models/): list, verify, add, build (`make models`)")
    zsub = z.add_subparsers(dest="zoo_what", required=True, metavar="WHAT")
    zsub.add_parser("list", help="every zoo model with its size and the env it is the default for")
    zv = zsub.add_parser("verify", help="check every file's sha256 against the cards")
    zv.add_argument("names", nargs="*")
    za = zsub.add_parser("add", help="copy a trained folder into the zoo with its card (hashes, size budget)")
    za.add_argument("name", help="zoo name: the folder under models/, used as zoo:NAME")
    za.add_argument("path", help="the trained model folder")
    za.add_argument("--card-json", help="the card's fields as a JSON file (see models/README.md)")
    za.add_argument("--kind", help="lm-target, lm-draft, world-model, reward-model")
    za.add_argument("--description")
    za.add_argument(
        "--include",
        action="append",
        help="glob of files to take from PATH (repeatable; default all but checkpoints)",
    )
    zb = zsub.add_parser("build", help="retrain zoo models from scratch with their cards' commands")
    zb.add_argument("names", nargs="*", help="default: every model")
    zb.add_argument("--data", default="build/zoo-data", help="where the collected data goes ($DATA)")
    zb.add_argument("--out", default="build/zoo", help="where each model is trained ($OUT = OUT/NAME)")
    zb.add_argument("--install", action="store_true", help="replace the zoo's folders with the results")
    zb.add_argument("--dry-run", action="store_true", help="print the commands only")
    for zp in (z, *zsub.choices.values()):
        zp.set_defaults(func=cmd_zoo)

    p = sub.add_parser("doctor", help="check dependencies and print the commands that fix what is missing")
    p.set_defaults(func=cmd_doctor)

    parents = {"": sub, "train": tsub}
    for parent, target in COMMANDS:
        module_name, _, attr = target.partition(":")
        register: Callable[[Any], None] = getattr(importlib.import_module(module_name), attr)
        register(parents[parent])
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from lynn.agents import UnknownAgentError
    from lynn.eval.runner import EvalError

    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
    except FlagError as exc:  # a flag's value the config cannot take: one line, like the errors below
        print(f"lynn: error: {exc}", file=sys.stderr)
        return 2
    if getattr(args, "takes_extra_argv", False):  # `lynn bench NAME`: the benchmark parses its own flags
        args.extra_argv = extra
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows up here, not at interpreter exit
        return code
    except (UsageError, EvalError, UnknownAgentError, FileNotFoundError) as exc:
        print(f"lynn: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("lynn: interrupted; `lynn eval` resumes where it stopped", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader left (`| head`): say nothing, and keep Python's exit-time flush from failing too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a tool killed by a closed pipe


if __name__ == "__main__":
    sys.exit(main())
