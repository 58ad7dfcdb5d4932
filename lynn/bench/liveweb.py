"""LiveWeb step and reset latency: ours against raw Playwright and the CDP floor, interleaved step by step
on the same bundled pages in one run; and against BrowserGym's documented/measured figures (FIELD-NOTES:
1.8 s median step with its defaults, 0.26-0.31 s tuned; reset 1.6-3.1 s).

The step mix (logged in, on one shop product) cycles through four clicks: the quantity field (navigates
nowhere), "Add to cart" (POST + redirect), the product's category link and the product's link (both
navigate). Each click is made four ways, each in its own Chromium, in a balanced order (:data:`ORDERS`):

* **Playwright**: ``locator.click()`` + ``page.aria_snapshot(mode="ai")`` + the title (issue 12's floor);
* **CDP floor**: a CDP session from Playwright: one script for the element's point, ``Input.dispatchMouseEvent``
  press/release, the wait for the navigation the click asked for (none: no wait), and one in-page JS walk
  of the tree for the observation (text lines of roles and names: not our observation, its lower bound);
* **ours**: ``env.step("click('ID')")`` with the defaults (``BrowserSession.fast_click`` and ``fast_snapshot``: a
  hit-tested click by point, and the observation's aria snapshot in the call that tells whether the click asked
  for a navigation, or in one call that waits in the new document for DOMContentLoaded; same bytes as
  Playwright's);
* **ours, Playwright's path**: a second env with both off (``fast_click=False, fast_snapshot=False``: Playwright's
  ``locator.click``, its load-state wait and its ``aria_snapshot``), so the fast paths' gain is measured in the
  same run.

Our reset is a new tab in the kept browser context with the last episode's state cleared (or a fresh context
when that cannot be done: ``BrowserSession.reuse_context``), login when the task needs it, the start page and
its observation; raw Playwright does a new context + new page + goto + aria snapshot. The four ways of
resetting (raw, ours without and with login, ours with the fast paths off) take turns in the same balanced
order.
Run: ``lynn bench liveweb`` or ``.venv/bin/python benchmarks/bench_liveweb.py`` (same flags).

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
from typing import Any

from lynn.errors import UsageError

BROWSERGYM_STEP_DEFAULT_S = 1.8  # FIELD-NOTES: measured here, slow_mo=1 s + 0.5 s pre-observation delay
BROWSERGYM_STEP_TUNED_S = 0.26  # FIELD-NOTES: slow_mo=0, pre_observation_delay=0 (lower bound of 0.26-0.31)
BROWSERGYM_RESET_S = 1.6  # FIELD-NOTES: lower bound of the measured 1.6-3.1 s
TASK = "shop.my_order_status.0"  # a shop task that logs in (the cart needs a session)
PRODUCT = 52
KINDS = ("no navigation", "POST + redirect", "link")
# The order of the four ways in successive rounds: a Williams square, in which every way comes right after every
# other way once in four rounds. A rotation of one order (used until 2026-12-06) keeps the neighbours: the way after
# raw Playwright always paid for the teardown of the context raw Playwright had just closed (its processes exit
# after close() returns, on the same cores).
ORDERS = ((0, 1, 3, 2), (1, 2, 0, 3), (2, 3, 1, 0), (3, 0, 2, 1))

# The CDP floor's one script per click: the element's point (scrolled into view), found by role and name.
_FIND = """([role, name]) => {
  const sel = {link: 'a', button: 'button', spinbutton: 'input[type=number]'}[role];
  const el = [...document.querySelectorAll(sel)].find((e) => role === 'spinbutton' || e.textContent.trim() === name);
  el.scrollIntoViewIfNeeded(true);
  const r = el.getBoundingClientRect();
  return [r.left + r.width / 2, r.top + r.height / 2];
}"""
# The CDP floor's observation: one walk of the DOM, a line per visible element with text or a role.
_WALK = """(() => {
  const out = [];
  const walk = (el, depth) => {
    if (!el.checkVisibility()) return;
    const own = [...el.childNodes].filter((n) => n.nodeType === 3).map((n) => n.data.trim()).join(' ');
    const role = el.getAttribute('role') || el.tagName.toLowerCase();
    if (own || /^(a|button|input|select|textarea|h[1-6]|li|tr|td|form|nav|main)$/.test(role)) {
      out.push(' '.repeat(depth) + role + (own ? ' "' + own + '"' : '') + (el.value ? ': ' + el.value : ''));
    }
    for (const c of el.children) walk(c, depth + 1);
  };
  walk(document.body, 0);
  return document.title + '\\n' + out.join('\\n');
})()"""


def median_ms(xs: list[float]) -> float:
    return statistics.median(xs) * 1000


def _mix(product_name: str) -> list[tuple[str, str, str]]:
    """(kind, role, name) of the four clicks of one cycle, starting on the product page."""
    return [
        ("no navigation", "spinbutton", "Quantity"),
        ("POST + redirect", "button", "Add to cart"),
        ("link", "link", "Books"),
        ("link", "link", product_name),
    ]


class _Raw:
    """One raw-Playwright or CDP-floor Chromium, logged in like the env, on the product page."""

    def __init__(self, pw: Any, urls: dict[str, str], cookies: list[dict[str, str]], cdp: bool) -> None:
        from lynn.envs.liveweb.browser import CHROMIUM_FLAGS, _NavWatch, chromium_executable

        kwargs: dict[str, Any] = {"args": CHROMIUM_FLAGS, "headless": True}
        if chromium_executable():
            kwargs["executable_path"] = chromium_executable()
        self.browser = pw.chromium.launch(**kwargs)
        self.urls, self.cookies = urls, cookies
        self.context = self.browser.new_context(viewport={"width": 1280, "height": 720})
        self.context.add_cookies(cookies)
        self.page = self.context.new_page()
        self.page.goto(f"{urls['shop']}/product/{PRODUCT}", wait_until="domcontentloaded")
        self.watch = _NavWatch(self.context.new_cdp_session(self.page)) if cdp else None

    def playwright_step(self, role: str, name: str) -> None:
        self.page.get_by_role(role, name=name, exact=True).first.click()  # type: ignore[arg-type]
        self.page.wait_for_load_state("domcontentloaded")
        self.page.aria_snapshot(mode="ai")
        self.page.title()

    def cdp_step(self, role: str, name: str) -> None:
        assert self.watch is not None
        cdp = self.watch.cdp
        x, y = cdp.send(
            "Runtime.evaluate",
            {"expression": f"({_FIND})({json.dumps([role, name])})", "returnByValue": True},
        )["result"]["value"]
        self.watch.arm()
        for kind in ("mousePressed", "mouseReleased"):
            cdp.send(
                "Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1}
            )
        cdp.send("Runtime.evaluate", {"expression": "0"})
        while not self.watch.settled():
            self.page.wait_for_timeout(1)
        cdp.send("Runtime.evaluate", {"expression": _WALK, "returnByValue": True})

    def reset(self) -> None:
        self.context.close()
        self.context = self.browser.new_context(viewport={"width": 1280, "height": 720})
        self.page = self.context.new_page()
        self.page.goto(self.urls["shop"] + "/", wait_until="domcontentloaded")
        self.page.aria_snapshot(mode="ai")

    def close(self) -> None:
        self.browser.close()


def interleaved(cycles: int, resets: int) -> dict[str, Any]:
    """Step and reset times of the four ways, interleaved (see the module docstring)."""
    from lynn.agents.web_expert import find_elements
    from lynn.envs.liveweb.browser import _acquire_driver, _release_driver
    from lynn.envs.liveweb.liveweb_env import LiveWebEnv, _form_login
    from lynn.envs.liveweb.sites.seed import DEFAULT_PASSWORD

    env = LiveWebEnv()  # the defaults: fast click + fast snapshot
    off_env = LiveWebEnv()  # both off: Playwright's click, waits and snapshot
    pw = _acquire_driver()  # the env's driver: one sync Playwright per thread
    raws: list[_Raw] = []
    steps: dict[str, dict[str, list[float]]] = {
        w: {k: [] for k in KINDS} for w in ("pw", "cdp", "fast", "locator")
    }
    phases: dict[str, dict[str, list[float]]] = {"fast": {}, "locator": {}}
    reset_t: dict[str, list[float]] = {"pw": [], "ours": [], "ours_login": [], "locator": []}
    try:
        off_env.reset(options={"task_id": TASK})
        off_env.browser.fast_snapshot = off_env.browser.fast_click = False
        off_obs, _ = off_env.reset(options={"task_id": TASK})
        off_obs, *_ = off_env.step(f"goto('{off_env.urls['shop']}/product/{PRODUCT}')")
        obs, _ = env.reset(options={"task_id": TASK})
        urls = env.urls
        user = env.task["login"]["shop"]
        cookies = [
            {"name": k, "value": v, "url": urls["shop"] + "/"}
            for k, v in _form_login(urls["shop"] + "/login", {"username": user, "password": DEFAULT_PASSWORD})
        ]
        raws = [_Raw(pw, urls, cookies, cdp=False), _Raw(pw, urls, cookies, cdp=True)]
        obs, *_ = env.step(f"goto('{urls['shop']}/product/{PRODUCT}')")
        product = obs["title"].split(" | ")[0].split(" - ")[0]
        if not find_elements(obs["axtree"], "heading", product):
            product = obs["axtree"].split('heading "', 1)[1].split('"', 1)[0]
        mix = _mix(product)
        n = 0
        for cycle in range(cycles + 1):  # the first cycle warms up
            for kind, role, name in mix:
                bids = {
                    "fast": find_elements(obs["axtree"], role, name)[0],
                    "locator": find_elements(off_obs["axtree"], role, name)[0],
                }

                def ours(way: str, bids: dict[str, str] = bids) -> None:
                    nonlocal obs, off_obs
                    one = env if way == "fast" else off_env
                    got, _, _, _, info = one.step(f"click('{bids[way]}')")
                    if info["error"]:
                        raise RuntimeError(f"our step ({way}) failed: {info['error']}")
                    if way == "fast":
                        obs = got
                    else:
                        off_obs = got
                    for k, v in info["timings"].items():
                        phases[way].setdefault(k, []).append(v)

                order: list[tuple[str, Any]] = [
                    ("pw", lambda role=role, name=name: raws[0].playwright_step(role, name)),
                    ("cdp", lambda role=role, name=name: raws[1].cdp_step(role, name)),
                    ("fast", lambda: ours("fast")),
                    ("locator", lambda: ours("locator")),
                ]
                n += 1
                for who, fn in (order[j] for j in ORDERS[n % 4]):
                    t = time.perf_counter()
                    fn()
                    if cycle:
                        steps[who][kind].append(time.perf_counter() - t)
        for i in range(resets + 1):
            ways = [
                ("pw", raws[0].reset),
                ("ours", lambda: env.reset(options={"task_id": "shop.product_price.0"})),  # no login
                ("ours_login", lambda: env.reset(options={"task_id": TASK})),
                ("locator", lambda: off_env.reset(options={"task_id": "shop.product_price.0"})),  # no login
            ]
            # each way follows each other as often (a reset right after raw Playwright has torn a whole context
            # down on the same cores pays for that teardown)
            for who, fn in (ways[j] for j in ORDERS[i % 4]):
                t = time.perf_counter()
                fn()
                if i:
                    reset_t[who].append(time.perf_counter() - t)
    finally:
        for raw in raws:
            raw.close()
        env.close()
        off_env.close()
        _release_driver(pw)
    return {
        "steps": steps,
        "resets": reset_t,
        "phases": {w: {k: median_ms(v) for k, v in one.items()} for w, one in phases.items()},
    }


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
    ap.add_argument("--cycles", type=int, default=12, help="cycles of the four-click mix (after one warm-up)")
    ap.add_argument("--steps", type=int, default=None, help="clicks per way (sets --cycles to steps / 4)")
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
    ap.add_argument("--json", default="", help="also write the figures to this JSON file")


def run(args: argparse.Namespace) -> int:
    """Run the benchmark and print the tables."""
    from lynn.envs.liveweb.sites.server import SiteServer

    if args.steps is not None:
        args.cycles = max(2, args.steps // 4)
    if args.cycles < 2 or args.resets < 1:
        raise UsageError("--cycles must be at least 2 and --resets at least 1")
    if args.browsergym_python and not Path(args.browsergym_python).exists():
        raise UsageError(
            f"--browsergym-python {args.browsergym_python} does not exist (see `lynn bench liveweb -h`)"
        )
    load_before = os.getloadavg()[0]
    res = interleaved(args.cycles, args.resets)
    load_after = os.getloadavg()[0]
    steps = res["steps"]
    every = {w: [t for k in KINDS for t in steps[w][k]] for w in steps}
    print(
        f"{'step (median ms)':22} {'Playwright':>11} {'CDP floor':>10} {'ours':>8} {'ours, PW path':>14} "
        f"{'ours/PW':>8} {'PW path/PW':>11} {'floor/PW':>9} {'ours/floor':>11}"
    )
    for kind in (*KINDS, "mix (all clicks)"):
        row = {w: median_ms(every[w] if kind.startswith("mix") else steps[w][kind]) for w in steps}
        print(
            f"{kind:22} {row['pw']:11.1f} {row['cdp']:10.1f} {row['fast']:8.1f} {row['locator']:14.1f} "
            f"{row['fast'] / row['pw']:7.2f}x {row['locator'] / row['pw']:10.2f}x {row['cdp'] / row['pw']:8.2f}x "
            f"{row['fast'] / row['cdp']:10.2f}x"
        )
    for w, label in (("fast", "our step phases"), ("locator", "ours, Playwright's path")):
        print(f"{label} (median ms): " + ", ".join(f"{k}={v:.1f}" for k, v in res["phases"][w].items()))
    r = {k: median_ms(v) for k, v in res["resets"].items()}
    print(f"\n{'reset (median ms)':44} {'raw Playwright':>15} {'Lynn LiveWeb':>13} {'ours/raw':>9}")
    print(
        f"{'new context + start page':44} {r['pw']:13.1f}ms {r['ours']:11.1f}ms {r['ours'] / r['pw']:8.2f}x"
    )
    print(f"{'with login':44} {r['pw']:13.1f}ms {r['ours_login']:11.1f}ms {r['ours_login'] / r['pw']:8.2f}x")
    print(f"{'fast paths off':44} {r['pw']:13.1f}ms {r['locator']:11.1f}ms {r['locator'] / r['pw']:8.2f}x")
    mix = median_ms(every["fast"])
    ratio = mix / median_ms(every["pw"])
    off_mix = median_ms(every["locator"])
    step, reset = mix / 1000, r["ours_login"] / 1000
    bgym: dict[str, dict[str, float]] = {}
    if args.browsergym_python:
        with SiteServer(("shop",)) as server:
            n, rr = min(args.cycles * 4, 12), min(args.resets, 4)  # its default step takes ~2 s
            for label, tuned in (("defaults", False), ("tuned", True)):
                bgym[label] = browsergym(
                    args.browsergym_python, args.browsergym_browsers, server.urls["shop"] + "/", n, rr, tuned
                )
        print(
            f"\n{'BrowserGym on the same page (own venv)':44} {'BrowserGym':>15} {'Lynn LiveWeb':>13} {'speed-up':>9}"
        )
        for label, one in bgym.items():
            print(
                f"{'step, its ' + label:44} {one['step_median_s'] * 1000:13.1f}ms {step * 1000:11.1f}ms "
                f"{one['step_median_s'] / step:8.1f}x"
            )
            print(
                f"{'reset, its ' + label:44} {one['reset_median_s'] * 1000:13.1f}ms {reset * 1000:11.1f}ms "
                f"{one['reset_median_s'] / reset:8.1f}x"
            )
    print(
        f"vs BrowserGym (FIELD-NOTES figures): step {BROWSERGYM_STEP_DEFAULT_S / step:.1f}x faster than its "
        f"defaults ({BROWSERGYM_STEP_DEFAULT_S} s), {BROWSERGYM_STEP_TUNED_S / step:.1f}x faster than tuned "
        f"({BROWSERGYM_STEP_TUNED_S} s); reset {BROWSERGYM_RESET_S / reset:.1f}x faster ({BROWSERGYM_RESET_S} s)"
    )
    print(
        f"goals: step <= 0.65x Playwright: {'met' if ratio <= 0.65 else 'NOT met'} ({ratio:.2f}x; Playwright's path "
        f"{off_mix / median_ms(every['pw']):.2f}x); step <= 100 ms on a quiet machine: "
        f"{'met' if mix <= 100 else 'NOT met'} ({mix:.0f} ms); reset <= 0.8x raw: "
        f"{'met' if r['ours'] <= 0.8 * r['pw'] else 'NOT met'} ({r['ours'] / r['pw']:.2f}x); load average "
        f"{load_before:.1f} -> {load_after:.1f} on {os.cpu_count()} cores"
    )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    # the four ways scripts/device_check.sh reads: "fast" is ours with the defaults (fast click +
                    # fast snapshot), "locator" ours with both off (Playwright's path)
                    "step_ms": {w: {k: median_ms(v) for k, v in steps[w].items()} for w in steps},
                    "mix_ms": {w: median_ms(v) for w, v in every.items()},
                    "ours_over_playwright": ratio,
                    "playwright_path_over_playwright": off_mix / median_ms(every["pw"]),
                    "ours_over_floor": mix / median_ms(every["cdp"]),
                    "phases_ms": res["phases"],
                    "reset_ms": r,
                    "load_average": [load_before, load_after],
                    "cores": os.cpu_count(),
                },
                indent=1,
            )
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` like ``lynn bench liveweb`` and run the benchmark."""
    from lynn.bench import main as bench_main

    return bench_main(__name__, argv)
