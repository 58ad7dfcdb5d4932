"""Time BrowserGym on a bundled Lynn page; run by :mod:`lynn.bench.liveweb` inside BrowserGym's own venv.

BrowserGym pins an older Playwright, so it cannot share Lynn's venv. Usage (prints one JSON line):
    BGYM_PYTHON lynn/bench/browsergym_probe.py URL --steps 20 --resets 5 [--tuned]
``--tuned`` sets ``slow_mo=0, pre_observation_delay=0`` (BrowserGym's defaults are 1 s and 0.5 s).
This script imports only BrowserGym and the standard library.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time


def bid_of(axtree: str, role: str, name: str) -> str:
    m = re.search(rf"\[(\w+)\] {role} '{re.escape(name)}'", axtree)
    if not m:
        raise RuntimeError(f"no {role} {name!r} in BrowserGym's axtree")
    return m.group(1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--resets", type=int, default=5)
    ap.add_argument("--tuned", action="store_true")
    a = ap.parse_args()

    from browsergym.core.env import BrowserEnv
    from browsergym.core.task import OpenEndedTask
    from browsergym.utils.obs import flatten_axtree_to_str

    kwargs = {"slow_mo": 0, "pre_observation_delay": 0.0} if a.tuned else {}
    env = BrowserEnv(
        OpenEndedTask, task_kwargs={"start_url": a.url, "goal": "browse"}, headless=True, **kwargs
    )
    steps, resets = [], []
    try:
        obs, info = env.reset(seed=0)
        for i in range(a.steps + 2):
            tree = flatten_axtree_to_str(obs["axtree_object"])
            action = f"click('{bid_of(tree, 'link', 'Books' if i % 2 == 0 else 'Lynn Shop')}')"
            t = time.perf_counter()
            obs, reward, terminated, truncated, info = env.step(action)
            if i >= 2:
                steps.append(time.perf_counter() - t)
            if obs.get("last_action_error"):
                raise RuntimeError(obs["last_action_error"])
        for i in range(a.resets + 1):
            t = time.perf_counter()
            env.reset(seed=i)
            if i >= 1:
                resets.append(time.perf_counter() - t)
    finally:
        env.close()
    print(
        json.dumps({"step_median_s": statistics.median(steps), "reset_median_s": statistics.median(resets)})
    )


if __name__ == "__main__":
    main()
