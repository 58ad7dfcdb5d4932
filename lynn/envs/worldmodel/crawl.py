"""Exploration data for the world model: a breadth-first crawl of the LiveWeb sites, recorded as transitions.

DynaWeb's world model learns from broad interaction data (the paper used NNetNav's exploration runs), not
from the expert's episodes alone. A page-memory world model (:class:`~lynn.envs.worldmodel.baselines.PageMemory`)
can only show a page it has seen: an instance whose product, order or post no recorded episode opened is
imagined on a neighbour's page, with the neighbour's values. A crawl opens every page a site links to, once
per login state, with the site's start data, so the dream shows the real values of any entity.

Each crawl step is ``goto(URL)`` from the page before, recorded in ``lynn collect``'s transition format
(``transitions.jsonl``; train split, ``task_id`` ``crawl.<first task of the login state>``). Its steps start at
1: a crawl is not a task instance, so ``lynn train world-model`` records no start page for it (it records step
0's page as a task's start). Every step is a real interaction: count them beside the world model's other data.

Why not a crawling library (Scrapy and the like): the world model needs the accessibility tree that
``Lynn/LiveWeb-v0`` observes, in the env's own sessions and login states, which only the env gives.

    python -m lynn.envs.worldmodel.crawl --out data/crawl --max-pages 400
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

__all__ = ["crawl", "login_states", "main"]

LINK = re.compile(r'/url: "?([/?][^"\s]*)"?')  # a path, or a query on the page's own path (pagination)
ENV_ID = "Lynn/LiveWeb-v0"


def login_states(tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One train task per (sites, login) pair, the logged-out and single-login states of a site first: the
    crawl starts from each one's start page."""
    first: dict[str, dict[str, Any]] = {}
    for t in tasks:
        if t.get("split") == "train":
            first.setdefault(
                json.dumps([sorted(t.get("sites") or []), t.get("login") or {}], sort_keys=True), t
            )
    return sorted(first.values(), key=lambda t: (bool(t.get("login")), t["task_id"]))


def _origin(url: str) -> str:
    m = re.match(r"^(https?://[^/]+)", url)
    return m.group(1) if m else ""


def crawl(
    out: str | Path,
    max_pages: int = 400,
    task_files: list[str] | None = None,
    progress: bool = True,
    bundled: bool = True,
) -> int:
    """Crawl the sites breadth-first from the start page of each login state of the bundled train tasks
    (and of ``task_files``' train tasks), up to ``max_pages`` pages each, and write the steps to
    ``out/transitions.jsonl`` (``bundled=False``: ``task_files``' states only). The first login state of a site crawls its public pages; every later
    (logged-in) state adds only what the first did not open (its account, orders, wishlist). Returns the
    number of steps written."""
    import gymnasium as gym

    import lynn  # noqa: F401  (registers the ids)
    from lynn.envs.liveweb.tasks import load_tasks

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    seen: dict[str, set[str]] = {}  # site -> the addresses its first state opened (or queued)
    written = 0
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(desc="crawl", unit="page")
    with (out / "transitions.jsonl").open("w", encoding="utf-8") as fh:
        for source in [*([None] if bundled else []), *(task_files or [])]:
            kw = {"tasks": source} if source else {}
            env = gym.make(ENV_ID, split="train", max_steps=10**6, disable_env_checker=True, **kw).unwrapped
            try:
                for task in login_states(load_tasks(source)):
                    episode = written  # unique per state: the first step's number overall
                    obs, _ = env.reset(options={"task_id": task["task_id"]})
                    origin = _origin(str(obs["url"]))
                    site = ",".join(sorted(task.get("sites") or []))
                    # The site's first state opens its public pages; each later (logged-in) state starts from
                    # a copy of that set, so it opens only what it alone links to, its own account pages.
                    first = site not in seen
                    site_seen = seen.setdefault(site, set()) if first else set(seen[site])
                    queue = [str(obs["url"])[len(origin) :] or "/"]
                    site_seen.add(queue[0])
                    pages = 0
                    while queue and pages < max_pages:
                        here = queue.pop(0)
                        if pages:  # the first page is the start page itself
                            action = f'goto("{origin}{here}")'
                            nxt, reward, term, trunc, info = env.step(action)
                            row = {
                                "env_id": ENV_ID,
                                "task_id": f"crawl.{task['task_id']}",
                                "split": "train",
                                "seed": 0,
                                "episode": episode,
                                "step": pages,  # never 0: no start page is recorded for a crawl
                                "goal": "",
                                "obs": obs,
                                "action": action,
                                "next_obs": nxt,
                                "reward": float(reward),
                                "done": bool(term or trunc),
                                "terminated": bool(term),
                                "truncated": bool(trunc),
                                "error": info.get("error"),
                            }
                            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
                            written += 1
                            obs = nxt
                            if bar is not None:
                                bar.update(1)
                        pages += 1
                        path = str(obs["url"])[len(origin) :].split("?")[0] or "/"
                        for link in LINK.findall(str(obs.get("axtree", ""))):
                            link = path + link if link.startswith("?") else link
                            if link not in site_seen:
                                site_seen.add(link)
                                queue.append(link)
            finally:
                env.close()
    if bar is not None:
        bar.close()
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="output folder (transitions.jsonl)")
    ap.add_argument("--max-pages", type=int, default=400, help="pages per login state")
    ap.add_argument(
        "--tasks", nargs="*", default=[], help="task files whose train tasks' login states to add"
    )
    ap.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True)
    args = ap.parse_args(argv)
    n = crawl(args.out, args.max_pages, args.tasks, progress=args.progress)
    print(f"{n} crawl steps -> {Path(args.out) / 'transitions.jsonl'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
