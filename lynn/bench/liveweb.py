"""LiveWeb step and reset latency: ours vs raw Playwright on the same bundled pages, and vs BrowserGym's
documented/measured figures (FIELD-NOTES: 1.8 s median step with its defaults, 0.26-0.31 s tuned;
reset 1.6-3.1 s).

A step is one click that navigates between two shop pages plus the observation; raw Playwright does the
same click on the same element plus ``page.aria_snapshot(mode="ai")`` (the floor: no parsing, no
bookkeeping). A reset is a fresh context, login when the task needs it, the start page and its
observation. Run: ``lynn bench liveweb`` or ``.venv/bin/python benchmarks/bench_liveweb.py`` (same flags).

BrowserGym side by side (optional; it pins Playwright 1.44, so it lives in its own venv and is timed by
``lynn/bench/browsergym_probe.py`` on the same bundled page):
    python3 -m venv /tmp/bgym-venv && /tmp/bgym-venv/bin/pip install browsergym-core
    mkdir -p /tmp/pwb/chromium-1117/chrome-linux && ln -sf /usr/bin/chromium /tmp/pwb/chromium-1117/chrome-linux/chrome
    .venv/bin/python benchmarks/bench_liveweb.py --browsergym-python /tmp/bgym-venv/bin/python --browsergym-browsers /tmp/pwb
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time
from pathlib import Path

from lynn.errors import UsageError

BROWSERGYM_STEP_DEFAULT_S = 1.8  # FIELD-NOTES: measured here, slow_mo=1 s + 0.5 s pre-observation delay
BROWSERGYM_STEP_TUNED_S = 0.26  # FIELD-NOTES: slow_mo=0, pre_observation_delay=0 (lower bound of 0.26-0.31)
BROWSERGYM_RESET_S = 1.6  # FIELD-NOTES: lower bound of the measured 1.6-3.1 s


def median_ms(xs: list[float]) -> float:
    return statistics.median(xs) * 1000


def raw_playwright(urls: dict[str, str], steps: int, resets: int) -> tuple[list[float], list[float]]:
    from playwright.sync_api import sync_playwright

    from lynn.envs.liveweb.browser import CHROMIUM_FLAGS, chromium_executable

    step_t, reset_t = [], []
    with sync_playwright() as pw:
        kwargs = {"args": CHROMIUM_FLAGS, "headless": True}
        if chromium_executable():
            kwargs["executable_path"] = chromium_executable()
        browser = pw.chromium.launch(**kwargs)
        ctx = browser.new_context()
        page = ctx.new_page()
        page.goto(urls["shop"] + "/", wait_until="domcontentloaded")
        page.aria_snapshot(mode="ai")
        for i in range(steps + 3):
            name = "Books" if i % 2 == 0 else "Lynn Shop"
            t = time.perf_counter()
            page.get_by_role("link", name=name, exact=True).first.click()
            page.wait_for_load_state("domcontentloaded")
            page.aria_snapshot(mode="ai")
            page.title()
            if i >= 3:  # warm-up
                step_t.append(time.perf_counter() - t)
        for i in range(resets + 1):
            t = time.perf_counter()
            ctx.close()
            ctx = browser.new_context()
            page = ctx.new_page()
            page.goto(urls["shop"] + "/", wait_until="domcontentloaded")
            page.aria_snapshot(mode="ai")
            if i >= 1:
                reset_t.append(time.perf_counter() - t)
        browser.close()
    return step_t, reset_t


def ours(steps: int, resets: int) -> tuple[list[float], list[float], list[float], dict[str, float]]:
    from lynn.agents.web_expert import find_elements
    from lynn.envs.liveweb.liveweb_env import LiveWebEnv

    env = LiveWebEnv()
    step_t, reset_t, login_reset_t, phases = [], [], [], {}
    try:
        obs, _ = env.reset(options={"task_id": "shop.product_price.0"})
        for i in range(steps + 3):
            name = "Books" if i % 2 == 0 else "Lynn Shop"
            bid = find_elements(obs["axtree"], "link", name)[0]
            t = time.perf_counter()
            obs, _, _, _, info = env.step(f"click('{bid}')")
            if i >= 3:
                step_t.append(time.perf_counter() - t)
                for k, v in info["timings"].items():
                    phases.setdefault(k, []).append(v)
            assert info["error"] is None, info["error"]
        for i in range(resets + 1):
            t = time.perf_counter()
            env.reset(options={"task_id": "shop.product_price.0"})  # no login
            if i >= 1:
                reset_t.append(time.perf_counter() - t)
            t = time.perf_counter()
            env.reset(options={"task_id": "shop.my_order_status.0"})  # logs in
            if i >= 1:
                login_reset_t.append(time.perf_counter() - t)
    finally:
        env.close()
    return step_t, reset_t, login_reset_t, {k: median_ms(v) for k, v in phases.items()}


def browsergym(
    python: str, browsers: str, url: str, steps: int, resets: int, tuned: bool
) -> dict[str, float]:
    """BrowserGym's median step/reset on ``url``, timed in its own venv by browsergym_probe.py."""
    probe = Path(__file__).with_name("browsergym_probe.py")  # stdlib + BrowserGym only: runs in its venv
    cmd = [python, str(probe), url, "--steps", str(steps), "--resets", str(resets)] + (
        ["--tuned"] if tuned else []
    )
    env = {**os.environ, "PLAYWRIGHT_BROWSERS_PATH": browsers}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200)
    if proc.returncode != 0:
        raise RuntimeError(f"browsergym probe failed: {proc.stderr[-800:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The benchmark's flags (shared by ``lynn bench liveweb`` and benchmarks/bench_liveweb.py)."""
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--resets", type=int, default=12)
    ap.add_argument(
        "--browsergym-python",
        default=os.environ.get("LYNN_BROWSERGYM_PYTHON"),
        help="python of a venv with browsergym-core (optional)",
    )
    ap.add_argument(
        "--browsergym-browsers",
        default=os.environ.get("LYNN_BROWSERGYM_BROWSERS", ""),
        help="PLAYWRIGHT_BROWSERS_PATH for BrowserGym's Playwright (see the module docstring)",
    )


def run(args: argparse.Namespace) -> int:
    """Run the benchmark and print the tables."""
    from lynn.envs.liveweb.sites.server import SiteServer

    if args.steps < 1 or args.resets < 1:
        raise UsageError("--steps and --resets must be at least 1")
    if args.browsergym_python and not Path(args.browsergym_python).exists():
        raise UsageError(
            f"--browsergym-python {args.browsergym_python} does not exist (see `lynn bench liveweb -h`)"
        )

    bgym: dict[str, dict[str, float]] = {}
    with SiteServer(("shop",)) as server:
        raw_step, raw_reset = raw_playwright(server.urls, args.steps, args.resets)
        if args.browsergym_python:
            n, r = min(args.steps, 12), min(args.resets, 4)  # its default step takes ~2 s
            for label, tuned in (("defaults", False), ("tuned", True)):
                bgym[label] = browsergym(
                    args.browsergym_python, args.browsergym_browsers, server.urls["shop"] + "/", n, r, tuned
                )
    our_step, our_reset, our_login_reset, phases = ours(args.steps, args.resets)

    rows = [
        ("step: click + observe (median)", median_ms(raw_step), median_ms(our_step)),
        ("reset: new context + start page (median)", median_ms(raw_reset), median_ms(our_reset)),
        ("reset with login (median)", median_ms(raw_reset), median_ms(our_login_reset)),
    ]
    print(f"{'measure':44} {'raw Playwright':>15} {'Lynn LiveWeb':>13} {'ours/raw':>9}")
    for name, anchor, mine in rows:
        print(f"{name:44} {anchor:13.1f}ms {mine:11.1f}ms {mine / anchor:8.2f}x")
    print("our step phases (median ms): " + ", ".join(f"{k}={v:.1f}" for k, v in phases.items()))
    step, reset = median_ms(our_step) / 1000, median_ms(our_login_reset) / 1000
    if bgym:
        print(
            f"\n{'BrowserGym on the same page (own venv)':44} {'BrowserGym':>15} {'Lynn LiveWeb':>13} {'speed-up':>9}"
        )
        for label, res in bgym.items():
            print(
                f"{'step, its ' + label:44} {res['step_median_s'] * 1000:13.1f}ms {step * 1000:11.1f}ms "
                f"{res['step_median_s'] / step:8.1f}x"
            )
            print(
                f"{'reset, its ' + label:44} {res['reset_median_s'] * 1000:13.1f}ms {reset * 1000:11.1f}ms "
                f"{res['reset_median_s'] / reset:8.1f}x"
            )
    print(
        f"vs BrowserGym (FIELD-NOTES figures): step {BROWSERGYM_STEP_DEFAULT_S / step:.1f}x faster than its "
        f"defaults ({BROWSERGYM_STEP_DEFAULT_S} s), {BROWSERGYM_STEP_TUNED_S / step:.1f}x faster than tuned "
        f"({BROWSERGYM_STEP_TUNED_S} s); reset {BROWSERGYM_RESET_S / reset:.1f}x faster ({BROWSERGYM_RESET_S} s)"
    )
    print(
        f"goals: step <= 100 ms: {'met' if median_ms(our_step) <= 100 else 'NOT met'} "
        f"({median_ms(our_step):.0f} ms); reset <= 500 ms: "
        f"{'met' if median_ms(our_login_reset) <= 500 else 'NOT met'} ({median_ms(our_login_reset):.0f} ms)"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` like ``lynn bench liveweb`` and run the benchmark."""
    from lynn.bench import main as bench_main

    return bench_main(__name__, argv)
