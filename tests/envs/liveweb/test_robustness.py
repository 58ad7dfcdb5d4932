"""Faults a real browser meets: dialogs, new tabs, downloads, pages that never load, other origins, a
killed chromium, a killed site server. The env reports each one and goes on; nothing leaks."""

from __future__ import annotations

import gc
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lynn.agents.web_expert import find_elements
from lynn.envs.liveweb.liveweb_env import LiveWebEnv
from tests.envs.liveweb._lab import LAB_TASKS, LabServer
from tests.envs.liveweb._procs import wait_gone as _wait_gone


def _bid(obs: dict, role: str, name: str) -> str:
    refs = find_elements(obs["axtree"], role, name)
    assert refs, f"no {role} {name!r} in\n{obs['axtree']}"
    return refs[0]


@pytest.fixture(scope="module")
def lab() -> Iterator[LabServer]:
    server = LabServer()
    yield server
    server.close()


@pytest.fixture(scope="module")
def env(lab: LabServer) -> Iterator[LiveWebEnv]:
    e = LiveWebEnv(tasks=LAB_TASKS, sites={"lab": lab.url}, nav_timeout_ms=1500, action_timeout_ms=1500)
    yield e
    e.close()


def test_user_tasks_and_sites_are_used_without_bundled_server(env: LiveWebEnv, lab: LabServer) -> None:
    obs, info = env.reset(options={"task_id": "lab.second"})
    assert env.server is None  # the task file names only the user's site
    assert obs["url"].startswith(lab.url) and obs["goal"] == "Open the second page"
    obs, reward, terminated, _, info = env.step(f"goto('{lab.url}/second')")
    obs, reward, terminated, _, info = env.step("send_msg_to_user('done')")
    assert terminated and reward == 1.0 and info["success"]


def test_webarena_multi_tab_start_url_and_storage_state(lab: LabServer, tmp_path: Path) -> None:
    host = lab.url.split("//")[1].split(":")[0]
    state = tmp_path / "state.json"
    cookie = {
        "name": "session",
        "value": "from-storage-state",
        "domain": host,
        "path": "/",
        "expires": -1,
        "httpOnly": False,
        "secure": False,
        "sameSite": "Lax",
    }
    state.write_text(json.dumps({"cookies": [cookie], "origins": []}))
    task = {
        **LAB_TASKS[0],
        "task_id": "lab.tabs",
        "storage_state": str(state),
        "start_url": "__LAB__/second |AND| __LAB__/whoami",
    }
    env = LiveWebEnv(tasks=[task], sites={"lab": lab.url})
    try:
        obs, info = env.reset(seed=0)
        tabs = obs["open_pages"].splitlines()
        assert len(tabs) == 2 and tabs[0].endswith("/second") and tabs[1].startswith("1*")
        assert "session=from-storage-state" in obs["axtree"]
    finally:
        env.close()


def test_js_dialogs_are_answered_and_reported(env: LiveWebEnv) -> None:
    obs, _ = env.reset(options={"task_id": "lab.greet"})
    obs, reward, terminated, _, info = env.step(f"click('{_bid(obs, 'button', 'Alert me')}')")
    assert not info["error"] and any("alert dialog" in e and "hello from lab" in e for e in info["events"])
    obs, *_, info = env.step(f"click('{_bid(obs, 'button', 'Confirm me')}')")
    assert any("confirm dialog" in e for e in info["events"]) and "yes" in obs["axtree"]


def test_new_tab_becomes_active_and_tabs_can_be_switched(env: LiveWebEnv) -> None:
    obs, _ = env.reset(options={"task_id": "lab.greet"})
    obs, *_, info = env.step(f"click('{_bid(obs, 'link', 'Open new tab')}')")
    assert not info["error"]
    lines = obs["open_pages"].splitlines()
    assert len(lines) == 2 and lines[1].startswith("1*") and "Second page" in obs["axtree"]
    obs, *_, info = env.step("tab_focus(0)")
    assert obs["open_pages"].splitlines()[0].startswith("0*") and "Open new tab" in obs["axtree"]
    obs, *_, info = env.step("tab_focus(7)")
    assert "no tab 7" in info["error"]
    obs, *_, info = env.step("tab_close()")
    assert not info["error"] and len(obs["open_pages"].splitlines()) == 1


def test_download_is_saved_and_reported(env: LiveWebEnv) -> None:
    obs, _ = env.reset(options={"task_id": "lab.greet"})
    obs, *_, info = env.step(f"click('{_bid(obs, 'link', 'Get file')}')")
    deadline = time.time() + 20
    events = list(info["events"])
    while not any("downloaded report.txt" in e for e in events) and time.time() < deadline:
        obs, *_, info = env.step("noop(100)")
        events += info["events"]
    assert any("downloaded report.txt" in e for e in events), events


def test_page_that_never_loads_times_out_and_env_recovers(env: LiveWebEnv, lab: LabServer) -> None:
    obs, _ = env.reset(options={"task_id": "lab.greet"})
    obs, reward, terminated, _, info = env.step(f"goto('{lab.url}/hang')")  # the server sleeps 20 s
    assert reward == 0 and not terminated and "goto failed" in info["error"] and "Timeout" in info["error"]
    obs, *_, info = env.step(f"goto('{lab.url}/second')")  # usable at once: the hung load was stopped
    assert not info["error"] and "Second page" in obs["axtree"]


def test_other_origins_are_blocked(env: LiveWebEnv) -> None:
    _check_blocking(env)


def test_other_origins_are_blocked_with_route_interception(lab: LabServer) -> None:
    routed = LiveWebEnv(tasks=LAB_TASKS, sites={"lab": lab.url}, network_guard="route")
    try:
        _check_blocking(routed)
    finally:
        routed.close()


def _check_blocking(env: LiveWebEnv) -> None:
    obs, _ = env.reset(options={"task_id": "lab.greet"})
    obs, reward, _, _, info = env.step("goto('http://example.invalid/')")
    assert reward == 0 and "outside the task's sites" in info["error"]
    obs, *_, info = env.step(f"click('{_bid(obs, 'link', 'External page')}')")
    assert any("blocked request to http://example.invalid" in e for e in info["events"])
    obs, *_, info = env.step(f"click('{_bid(obs, 'link', 'Elsewhere')}')")
    assert "example.invalid" not in obs["url"] or "ERR_BLOCKED" in (info["error"] or "")


def test_killed_chromium_is_reported_and_replaced(env: LiveWebEnv, lab: LabServer) -> None:
    obs, _ = env.reset(options={"task_id": "lab.greet"})
    env.step(f"goto('{lab.url}/second')")
    old = env.browser.browser_pids()
    assert old
    for pid in old:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert not _wait_gone(old)
    obs, reward, terminated, _, info = env.step("go_back()")
    assert reward == 0 and not terminated and "browser" in info["error"] and "restarted" in info["error"]
    assert obs["url"].startswith(lab.url)
    obs, *_, info = env.step(f"goto('{lab.url}/second')")
    assert not info["error"] and "Second page" in obs["axtree"]
    assert set(env.browser.browser_pids()).isdisjoint(old)
    obs, info = env.reset(options={"task_id": "lab.greet"})  # and reset works too
    assert "Lab" in obs["title"]


def test_killed_site_server_is_restarted() -> None:
    env = LiveWebEnv(split="test")
    try:
        obs, _ = env.reset(options={"task_id": "forum.post_score.3"})
        env.server.proc.kill()
        env.server.proc.wait()
        obs, reward, terminated, _, info = env.step(f"click('{_bid(obs, 'link', 'f/books')}')")
        assert "site server" in info["error"] and "restarted" in info["error"] and env.server.alive()
        obs, *_, info = env.step(f"click('{_bid(obs, 'link', 'f/books')}')")
        assert not info["error"] and "f/books" in obs["title"]
        env.server.proc.kill()
        env.server.proc.wait()
        obs, info = env.reset(options={"task_id": "forum.post_score.3"})
        assert env.server.alive() and "Lynn Forum" in obs["title"]
        pids = env.process_ids()
    finally:
        env.close()
    assert not _wait_gone(pids)


def test_close_and_garbage_collection_leave_no_process(lab: LabServer) -> None:
    env = LiveWebEnv(split="test")
    env.reset(options={"task_id": "shop.product_price.3"})
    pids = env.process_ids()
    assert len(pids) >= 2  # the site server and chromium
    env.close()
    env.close()  # idempotent
    assert not _wait_gone(pids)

    pids = _dropped_env_pids()  # the env goes out of scope without close()
    gc.collect()
    assert not _wait_gone(pids)


def test_a_session_collected_inside_playwrights_loop_does_not_hang() -> None:
    """The collector can run a dropped session's finalizer inside Playwright's event loop (its dispatcher
    greenlet, while another env's call waits); a sync Playwright call from there would wait for ever. The
    dropped browser is killed at once, the rest of its shutdown waits for a safe moment, and the other env
    goes on."""
    from lynn.envs.liveweb import browser as browser_module

    env = LiveWebEnv(split="test")
    other = LiveWebEnv(split="test")
    try:
        env.reset(options={"task_id": "shop.product_price.3"})
        other.reset(options={"task_id": "shop.product_price.3"})
        session = env.unwrapped.browser
        pids = session.browser_pids()
        assert pids
        # As the collector would: the finalizer runs from a callback of the loop the next sync call drives.
        session._state.browser._loop.call_soon(session._finalizer)
        obs, *_ = other.step("noop()")
        assert "Price" in obs["axtree"] or obs["url"]
        assert not _wait_gone(pids), "the collected session's chromium was not killed"
        assert browser_module._DEFERRED, "its Playwright calls were not left for a safe moment"
        browser_module.close_collected_sessions()
        assert not browser_module._DEFERRED
        obs, *_ = other.step("noop()")  # the driver the two shared is still there for the other env
        assert obs["url"].startswith("http")
    finally:
        env.close()
        other.close()


def _dropped_env_pids() -> list[int]:
    # A function scope, because Python 3.11 keeps a `del`eted local alive in a frame whose f_locals was read
    # (Playwright reads its callers' frames); a returned-from frame releases it.
    env = LiveWebEnv(split="test")
    env.reset(options={"task_id": "shop.product_price.3"})
    return env.process_ids()


def _make_env():  # noqa: ANN202  (a spawn-picklable factory)
    import gymnasium as gym

    import lynn  # noqa: F401

    return gym.make("Lynn/LiveWeb-v0", split="test")


@pytest.mark.slow
def test_two_envs_in_async_vector_env_do_not_share_state() -> None:
    import gymnasium as gym

    from lynn.agents.web_expert import WebExpert

    tid = "shop.add_to_cart.3"
    task = next(
        t
        for t in json.loads(Path("lynn/envs/liveweb/tasks/liveweb_tasks.json").read_text())
        if t["task_id"] == tid
    )
    venv = gym.vector.AsyncVectorEnv([_make_env, _make_env], context="spawn", shared_memory=False)
    try:
        obs, info = venv.reset(options={"task_id": tid})
        ports = {o.split(":")[2].split("/")[0] for o in obs["url"]}
        assert len(ports) == 2  # each env has its own server
        # Drive env 0 through the expert plan while env 1 only waits; env 1's database must stay untouched.
        local = LiveWebEnv(split="test")
        try:
            expert = WebExpert(local)
            local.task = task
            expert.reset(0)
            for _ in range(10):
                single = {k: obs[k][0] for k in ("axtree", "url")}
                action = expert.act(single, {})
                obs, reward, terminated, truncated, info = venv.step([action, "noop()"])
                if terminated[0]:
                    break
        finally:
            local.close()
        assert terminated[0] and reward[0] == 1.0
        assert not terminated[1] and reward[1] == 0.0
    finally:
        venv.close()
