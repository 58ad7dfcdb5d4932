"""The fast click (a hit-tested click by point, waiting only for the navigation it asked for; on by default): what it
guarantees (a covered element is an error, a click that navigates nowhere, a new tab, coordinate clicks), with the
fast snapshot (the default) and without it. Its observations and outcomes against Playwright's ``locator.click``
over an expert episode of half the templates (alternate pairs): test_fast_snapshot.py (one run replayed under
each configuration)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lynn.agents.web_expert import find_elements
from lynn.envs.liveweb.liveweb_env import LiveWebEnv

KEYS = ("url", "title", "axtree", "open_pages", "last_action", "last_action_error")


@pytest.fixture(scope="module")
def env() -> Iterator[LiveWebEnv]:
    e = LiveWebEnv()
    yield e
    e.close()


def _view(obs: dict) -> dict:
    return {key: obs[key] for key in KEYS}


def _start(env: LiveWebEnv, snapshot: bool, tid: str = "shop.product_price.0") -> dict:
    """An episode of ``tid`` with the fast click on and the fast snapshot as asked (set before the reset: the
    snapshot's hook goes into the episode's tab)."""
    if env.browser is None:
        env.reset(options={"task_id": tid})
    env.browser.fast_click, env.browser.fast_snapshot = True, snapshot
    return env.reset(options={"task_id": tid})[0]


@pytest.mark.parametrize("snapshot", [True, False], ids=["fast-snapshot", "playwright-snapshot"])
def test_a_covered_element_is_an_error_not_a_click_on_what_covers_it(env: LiveWebEnv, snapshot: bool) -> None:
    obs = _start(env, snapshot)
    env.browser._state.context.set_default_timeout(600)  # how long the locator waits for the cover to go
    books = find_elements(obs["axtree"], "link", "Books")[0]
    env.browser.page.evaluate(
        """() => { const d = document.createElement('a'); d.href = '/category/toys';
        d.style.cssText = 'position:fixed;inset:0;z-index:9;background:transparent';
        document.body.append(d); }"""
    )
    start = env.browser.page.url
    obs, reward, terminated, _, info = env.step(f"click('{books}')")
    assert info["error"] and 'is covered by <a href="/category/toys">' in info["error"], info["error"]
    assert obs["url"] == start and not terminated  # neither Books nor the cover's Toys opened
    env.browser.page.evaluate("() => document.querySelector('a[style]').remove()")
    obs, _, _, _, info = env.step(f"click('{books}')")
    assert info["error"] is None and obs["url"].endswith("/category/books")


@pytest.mark.parametrize("snapshot", [True, False], ids=["fast-snapshot", "playwright-snapshot"])
def test_a_click_that_stays_on_the_page_and_one_that_opens_a_tab(env: LiveWebEnv, snapshot: bool) -> None:
    obs = _start(env, snapshot)
    search = find_elements(obs["axtree"], "textbox", "Search products")[0]
    url = obs["url"]
    obs, _, _, _, info = env.step(f"click('{search}')")  # focuses the field, navigates nowhere
    assert info["error"] is None and obs["url"] == url
    assert f'[{search}] textbox "Search products" [active]' in obs["axtree"]
    env.browser.page.evaluate(
        """() => { const a = document.createElement('a'); a.href = '/category/books'; a.target = '_blank';
        a.textContent = 'Books in a new tab'; document.body.prepend(a); }"""
    )
    obs, _, _, _, info = env.step("noop()")
    link = find_elements(obs["axtree"], "link", "Books in a new tab")[0]
    obs, _, _, _, info = env.step(f"click('{link}')")
    assert info["error"] is None and obs["url"].endswith("/category/books"), info
    assert obs["open_pages"].count("\n") == 1 and "new tab opened" in " ".join(info["events"])


@pytest.mark.parametrize("snapshot", [True, False], ids=["fast-snapshot", "playwright-snapshot"])
def test_coordinate_clicks_wait_for_the_navigation_they_cause_and_only_for_it(
    env: LiveWebEnv, snapshot: bool
) -> None:
    obs = _start(env, snapshot)
    url = obs["url"]
    assert "Welcome to Lynn Shop" in obs["axtree"]
    obs, _, _, _, info = env.step("mouse_click(640, 700)")  # blank page area: nothing to wait for
    assert info["error"] is None and obs["url"] == url
    box = env.browser.page.get_by_role("button", name="Go").bounding_box()
    obs, _, _, _, info = env.step(
        f"mouse_click({box['x'] + box['width'] / 2}, {box['y'] + box['height'] / 2})"
    )
    assert info["error"] is None and "/search" in obs["url"]  # the form's page, not the one it left
    assert "Welcome to Lynn Shop" not in obs["axtree"]  # observed after the home page was left


@pytest.mark.parametrize("snapshot", [True, False], ids=["fast-snapshot", "playwright-snapshot"])
def test_a_click_whose_script_opens_a_tab_is_observed_with_the_tab(env: LiveWebEnv, snapshot: bool) -> None:
    """``window.open`` from a click handler: the observation after the click waits for the new tab (the fast
    snapshot reads the new-tab flag of the page's own world through an event, see ``_POPUP_WATCH``)."""
    obs = _start(env, snapshot)
    env.browser.page.evaluate(
        """() => { const b = document.createElement('button'); b.textContent = 'Open books';
        b.onclick = () => window.open('/category/books'); document.body.prepend(b); }"""
    )
    obs, _, _, _, info = env.step("noop()")
    button = find_elements(obs["axtree"], "button", "Open books")[0]
    obs, _, _, _, info = env.step(f"click('{button}')")
    assert info["error"] is None and obs["url"].endswith("/category/books"), info
    assert obs["open_pages"].count("\n") == 1 and "new tab opened" in " ".join(info["events"])
    obs, _, _, _, info = env.step("tab_focus(0)")  # the flag was read once: no wait for another tab
    assert info["error"] is None and obs["open_pages"].startswith("0* ") and obs["title"]
