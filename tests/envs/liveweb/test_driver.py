"""The Playwright driver a process's browser sessions share: kept between sessions, stopped by
``shutdown_driver()`` and at exit, never left behind."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from lynn.envs.liveweb import browser as browser_module
from lynn.envs.liveweb.browser import BrowserSession, cmdline, descendant_pids
from tests.envs.liveweb._procs import wait_gone as _wait_gone

ROOT = Path(__file__).resolve().parents[3]


async def _one() -> int:
    return 1


def _drivers() -> list[int]:
    return sorted(p for p in descendant_pids() if "run-driver" in cmdline(p))


def test_the_driver_is_kept_between_sessions_and_stopped_on_request() -> None:
    browser_module.shutdown_driver()  # one an earlier test's sessions left idle
    assert not _drivers(), "a driver is still in use: a browser session was left open"
    pw = browser_module._acquire_driver()  # as a session does at its launch, and at its close:
    drivers = _drivers()
    assert len(drivers) == 1
    browser_module._release_driver(pw)
    assert _drivers() == drivers, "the driver stopped with its last session"
    assert asyncio.run(_one()) == 1  # as after a stopped driver: an idle one leaves asyncio to the user

    session = BrowserSession()  # the kept driver serves the next session
    session.new_context(set())
    session.goto("about:blank")
    assert _drivers() == drivers
    assert not browser_module.shutdown_driver(), "shut down under a live session"
    assert session.page.evaluate("1 + 1") == 2
    chromium = session.browser_pids()
    session.close()
    assert not _wait_gone(chromium)
    assert asyncio.run(_one()) == 1

    assert browser_module.shutdown_driver()
    assert not _wait_gone(drivers), "shutdown_driver() left the driver's process"
    assert not browser_module.shutdown_driver()  # none left to stop

    pw = browser_module._acquire_driver()  # a new driver after the shutdown, which answers
    renewed = _drivers()
    assert len(renewed) == 1 and renewed != drivers
    pw.request.new_context().dispose()
    browser_module._release_driver(pw)
    assert browser_module.shutdown_driver()
    assert not _wait_gone(renewed)


_AT_EXIT = """
import atexit, json
from pathlib import Path
seen = {}

def alive(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False

def report():  # registered first, so it runs after the browser module's exit handler
    seen["left_at_exit"] = [p for p in seen["drivers"] if alive(p)]
    print(json.dumps(seen), flush=True)

atexit.register(report)
from lynn.envs.liveweb import browser
pw = browser._acquire_driver()  # a session's launch and close, without the browser
pw.request.new_context().dispose()
browser._release_driver(pw)
seen["drivers"] = [p for p in browser.descendant_pids() if "run-driver" in browser.cmdline(p)]
"""


def test_a_kept_driver_ends_with_the_interpreter() -> None:
    """The exit stops the idle driver (no shutdown_driver() call, no session open) before the interpreter
    ends, not only when its pipe closes."""
    out = subprocess.run(
        [sys.executable, "-c", _AT_EXIT], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    ).stdout
    seen = json.loads(out.strip().splitlines()[-1])
    assert len(seen["drivers"]) == 1, out
    assert not seen["left_at_exit"], "the exit handler left the driver running"
    assert not _wait_gone(seen["drivers"]), "the driver outlived the interpreter"
