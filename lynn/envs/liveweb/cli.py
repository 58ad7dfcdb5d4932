"""``lynn sites serve`` (the bundled sites for a person to click through) and ``lynn collect`` (transition
data for world-model training). Heavy imports happen inside the commands."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from lynn.errors import UsageError


def register(sub: Any) -> None:
    """Add the ``sites``, ``collect`` and ``bench liveweb`` subcommands to the ``lynn`` parser."""
    p = sub.add_parser("sites", help="the bundled LiveWeb sites (shop, forum, admin)")
    sp = p.add_subparsers(dest="sites_command", required=True, metavar="ACTION")
    s = sp.add_parser("serve", help="serve the bundled sites until Ctrl-C")
    s.add_argument("--sites", default="shop,forum,admin", help="comma-separated subset of shop,forum,admin")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument(
        "--port", type=int, default=0, help="first port (sites get PORT, PORT+1, ...; 0 = ephemeral)"
    )
    s.add_argument("--data", help="folder for the working databases (default: a temporary copy)")
    s.add_argument("--seconds", type=float, default=None, help="stop after this long (default: until Ctrl-C)")
    s.set_defaults(func=cmd_sites_serve)

    c = sub.add_parser(
        "collect", help="record (goal, obs, action, next obs, reward, done) transitions as JSONL"
    )
    c.add_argument("env_id")
    c.add_argument("--agent", default="expert")
    c.add_argument("--epsilon", type=float, default=None, help="exploration rate passed to the agent")
    c.add_argument("--out", default="data")
    c.add_argument("--split", default="train")
    c.add_argument("--episodes", type=int, default=1, help="episodes per task")
    c.add_argument("--tasks", help="comma-separated task ids (default: the whole split)")
    c.add_argument("--limit", type=int, help="stop after this many tasks")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--max-steps", type=int, default=30)
    c.set_defaults(func=cmd_collect)


def cmd_sites_serve(args: argparse.Namespace) -> int:
    from lynn.envs.liveweb.sites.seed import ADMIN_PASSWORD, ADMIN_USER, DEFAULT_PASSWORD
    from lynn.envs.liveweb.sites.server import SITE_NAMES, SiteServer

    sites = tuple(s.strip() for s in args.sites.split(",") if s.strip())
    bad = [s for s in sites if s not in SITE_NAMES]
    if bad or not sites:
        raise UsageError(f"unknown sites {bad}; choose from {', '.join(SITE_NAMES)}")
    ports = {s: args.port + i for i, s in enumerate(sites)} if args.port else None
    try:
        server = SiteServer(sites, host=args.host, ports=ports, data_dir=args.data)
    except RuntimeError as exc:
        raise UsageError(str(exc).splitlines()[-1]) from exc
    with server:
        for site, url in server.urls.items():
            print(f"{site:6} {url}")
        print(
            f"logins: shop/forum users (e.g. alice.anders, alice<NN>) password {DEFAULT_PASSWORD!r}; "
            f"admin {ADMIN_USER!r} / {ADMIN_PASSWORD!r}",
            flush=True,
        )
        deadline = None if args.seconds is None else time.monotonic() + args.seconds
        try:
            while server.alive() and (deadline is None or time.monotonic() < deadline):
                time.sleep(0.2)
        except KeyboardInterrupt:
            pass
    return 0


TEXT_KEYS = ("url", "title", "axtree", "open_pages", "last_action", "last_action_error")


def _text_obs(obs: dict[str, Any]) -> dict[str, Any]:
    return {k: obs[k] for k in TEXT_KEYS if k in obs}


def cmd_collect(args: argparse.Namespace) -> int:
    import gymnasium as gym

    import lynn  # noqa: F401
    from lynn.agents import make_agent
    from lynn.cli import UsageError
    from lynn.eval.runner import list_tasks

    if args.epsilon is not None and not 0 <= args.epsilon <= 1:
        raise UsageError("--epsilon must be in [0, 1]")
    tasks = [t["task_id"] for t in list_tasks(args.env_id, args.split)]
    if args.tasks:
        wanted = args.tasks.split(",")
        unknown = [t for t in wanted if t not in tasks]
        if unknown:
            raise UsageError(f"unknown task ids in split {args.split!r}: {', '.join(unknown[:5])}")
        tasks = wanted
    if args.limit:
        tasks = tasks[: args.limit]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "transitions.jsonl"
    env = gym.make(args.env_id)
    agent_kwargs = {"epsilon": args.epsilon} if args.epsilon is not None else {}
    agent = make_agent(args.agent, env, **agent_kwargs)
    n_steps = n_success = episode = 0
    try:
        with path.open("a", encoding="utf-8") as fh:
            for tid in tasks:
                for _ in range(args.episodes):
                    seed = args.seed + episode
                    obs, info = env.reset(seed=seed, options={"task_id": tid})
                    agent.reset(seed=seed)
                    for step in range(args.max_steps):
                        action = agent.act(obs, info)
                        next_obs, reward, terminated, truncated, info = env.step(action)
                        truncated = truncated or step == args.max_steps - 1
                        done = bool(terminated or truncated)
                        fh.write(
                            json.dumps(
                                {
                                    "env_id": args.env_id,
                                    "task_id": tid,
                                    "episode": episode,
                                    "step": step,
                                    "goal": obs.get("goal", ""),
                                    "obs": _text_obs(obs),
                                    "action": action,
                                    "next_obs": _text_obs(next_obs),
                                    "reward": float(reward),
                                    "done": done,
                                    "terminated": bool(terminated),
                                    "truncated": bool(truncated),
                                    "error": info.get("error"),
                                },
                                ensure_ascii=False,
                            )
                            + "\n"
                        )
                        n_steps += 1
                        obs = next_obs
                        if done:
                            n_success += bool(info.get("success"))
                            break
                    episode += 1
    finally:
        env.close()
    print(f"{n_steps} transitions from {episode} episodes ({n_success} successful) -> {path}")
    return 0
