"""An agent written against BrowserGym's documented API (its high-level action strings, its observation
keys) runs on LiveWeb unchanged; BrowserGym's defaults and numeric-argument checks."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lynn.envs.liveweb.liveweb_env import LiveWebEnv
from lynn.envs.liveweb.tasks import load_tasks

from ._lab import LAB_TASKS, LabServer

TASKS = {t["task_id"]: t for t in load_tasks()}


class BrowserGymStyleAgent:
    """Written from BrowserGym's documentation, not LiveWeb's: it reads the goal from ``goal_object``,
    finds elements in ``axtree_object`` by their ``browsergym_id``, checks ``extra_element_properties``
    visibility, and answers with free text around fenced action code, several actions per step."""

    def __init__(self, query: str) -> None:
        self.query = query
        self.step = 0

    @staticmethod
    def find(obs: dict[str, Any], role: str, name: str | None = None, prefix: str | None = None) -> str:
        for node in obs["axtree_object"]["nodes"]:
            bid = node.get("browsergym_id")
            if bid is None or node.get("role", {}).get("value") != role:
                continue
            got = node.get("name", {}).get("value", "")
            if (name is None or got == name) and (prefix is None or got.startswith(prefix)):
                if obs["extra_element_properties"][bid]["visibility"] > 0.5:
                    return bid
        raise AssertionError(f"no visible {role} {name or prefix!r}")

    @staticmethod
    def texts(obs: dict[str, Any]) -> list[str]:
        return [
            n["name"]["value"]
            for n in obs["axtree_object"]["nodes"]
            if n.get("role", {}).get("value") == "StaticText"
        ]

    def get_action(self, obs: dict[str, Any]) -> str:
        goal = obs["goal_object"][0]["text"]
        assert goal == obs["chat_messages"][0]["message"]
        self.step += 1
        if self.step == 1:
            box, go = self.find(obs, "textbox", "Search products"), self.find(obs, "button", "Go")
            return f"I need to search the shop first.\n```python\nfill('{box}', '{self.query}')\nclick('{go}')\n```"
        if self.step == 2 and goal.startswith("What is the price"):
            return f"The product is listed; I open it.\n<action>click('{self.find(obs, 'link', self.query)}')</action>"
        price = next((t for t in self.texts(obs) if t.startswith("Price: ")), "")
        return f"send_msg_to_user('{price.removeprefix('Price: ') or 'done'}')"


@pytest.fixture(scope="module")
def env() -> Iterator[LiveWebEnv]:
    e = LiveWebEnv(obs_format="browsergym", noop_wait_ms=0)
    yield e
    e.close()


def _episode(env: LiveWebEnv, task_id: str, query: str, steps: int = 4) -> tuple[float, int, dict]:
    agent = BrowserGymStyleAgent(query)
    obs, info = env.reset(options={"task_id": task_id})
    for n in range(1, steps + 1):
        assert env.observation_space.contains(obs)
        obs, reward, terminated, truncated, info = env.step(agent.get_action(obs))
        assert not info["error"], info["error"]
        if terminated or truncated:
            return reward, n, obs
    return 0.0, steps, obs


def test_browsergym_agent_solves_an_info_task(env: LiveWebEnv) -> None:
    task = TASKS["shop.product_price.0"]
    reward, steps, obs = _episode(env, task["task_id"], task["instantiation_dict"]["product"])
    assert reward == 1.0 and steps == 3
    assert obs["chat_messages"][-1]["role"] == "assistant"


def test_browsergym_agent_and_end_on_success(env: LiveWebEnv) -> None:
    task = next(t for t in TASKS.values() if t["task_id"].startswith("shop.search_results."))
    query = task["instantiation_dict"]["query"]
    reward, steps, _ = _episode(env, task["task_id"], query)
    assert reward == 1.0 and steps == 2  # the answer step scores the listing the search reached
    env.end_on_success = True  # BrowserGym ends a WebArena episode as soon as the goal state holds
    try:
        reward, steps, _ = _episode(env, task["task_id"], query)
        assert reward == 1.0 and steps == 1
    finally:
        env.end_on_success = False


def test_observation_keys_follow_browsergym(env: LiveWebEnv) -> None:
    obs, _ = env.reset(options={"task_id": "shop.product_price.0"})
    for key in (
        "chat_messages",
        "goal_object",
        "open_pages_urls",
        "open_pages_titles",
        "active_page_index",
        "dom_object",
        "axtree_object",
        "extra_element_properties",
        "focused_element_bid",
        "elapsed_time",
        "goal",
        "url",
        "last_action",
        "last_action_error",
    ):
        assert key in obs, key
    assert obs["open_pages_urls"] == [obs["url"]] and obs["open_pages_titles"][0].startswith("Home")
    assert obs["active_page_index"].tolist() == [0] and obs["elapsed_time"][0] >= 0
    assert obs["dom_object"]["documents"] and obs["dom_object"]["strings"]
    tagged = [n for n in obs["axtree_object"]["nodes"] if "browsergym_id" in n]
    assert len(tagged) >= 20 and all(n["browsergym_id"] in obs["axtree"] for n in tagged)
    go = BrowserGymStyleAgent.find(obs, "button", "Go")
    x, y, w, h = obs["extra_element_properties"][go]["bbox"]
    assert obs["extra_element_properties"][go]["set_of_marks"] and w > 0 and h > 0
    # A coordinate agent clicks the box it was given: the search runs (empty query).
    obs, _, _, _, info = env.step(f"mouse_click({x + w / 2}, {y + h / 2})")
    assert not info["error"] and "/search" in obs["url"]
    box = BrowserGymStyleAgent.find(obs, "textbox", "Search products")
    numeric = box[1:] if re.fullmatch(r"e\d+", box) else repr(box)  # a numeric id, as BrowserGym writes them
    obs, _, _, _, info = env.step(f"click({numeric})\nkeyboard_type('tea')")
    assert not info["error"] and obs["focused_element_bid"] == box


def test_huge_scroll_is_clamped_and_the_page_still_answers(env: LiveWebEnv) -> None:
    obs, _ = env.reset(options={"task_id": "shop.product_price.0"})
    obs, _, _, _, info = env.step("scroll(1e308, -1e308)")
    assert not info["error"]
    box = BrowserGymStyleAgent.find(obs, "textbox", "Search products")
    obs, _, _, _, info = env.step(f"fill('{box}', 'tea')")  # was: every element action timed out
    assert not info["error"]
    obs, _, _, _, info = env.step("mouse_move(1e9, -1e9); scroll_at(-5, 99999, 0, 1e300)")
    assert not info["error"]


@pytest.fixture(scope="module")
def lab() -> Iterator[LabServer]:
    server = LabServer()
    yield server
    server.close()


def test_browsergym_defaults_and_file_upload(lab: LabServer) -> None:
    task = {**LAB_TASKS[0], "task_id": "lab.form", "start_url": "__LAB__/form"}
    env = LiveWebEnv(tasks=[task], sites={"lab": lab.url}, obs_format="browsergym")
    try:
        obs, info = env.reset(seed=0)
        t = time.perf_counter()
        env.step("noop()")
        assert time.perf_counter() - t >= 0.9  # BrowserGym's noop() waits 1000 ms
        upload = Path(env.browser.upload_dir)
        (upload / "report.txt").write_text("hello")
        file_input = re.search(r"\[(e\d+)\] button \"Attachment\"", obs["axtree"]) or re.search(
            r"\[(e\d+)\] [a-z]+ \"Attachment\"", obs["axtree"]
        )
        assert file_input, obs["axtree"]
        bid = file_input.group(1)
        obs, _, _, _, info = env.step(f"upload_file('{bid}', 'report.txt')")
        assert not info["error"] and "report.txt" in obs["axtree"]
        obs, _, _, _, info = env.step(f"upload_file('{bid}', '../../etc/passwd')")
        assert "upload dir" in info["error"]
        colour = re.search(r"\[(e\d+)\] combobox \"Colour\"", obs["axtree"]).group(1)
        obs, _, _, _, info = env.step(f"select_option('{colour}', ['red', 'green'])")
        assert "takes one option" in info["error"]
        obs, _, _, _, info = env.step(f"select_option('{colour}', 'green')")
        assert not info["error"]
        note = re.search(r"\[(e\d+)\] textbox \"Note\"", obs["axtree"]).group(1)
        obs, _, _, _, info = env.step(f"fill('{note}', 'abc', True)")
        assert not info["error"] and "abc" in obs["axtree"]  # the last key was typed: keyup fired
        obs, _, _, _, info = env.step("goto('')")
        assert "needs a URL" in info["error"]
        obs, _, _, _, info = env.step("tab_close()")  # BrowserGym: the last tab becomes a blank one
        assert not info["error"] and obs["open_pages_urls"] == ["about:blank"]
        assert env.step("click('e1')\nsend_msg_to_user('x')\nnoop()")[4]["error"].endswith("put it last")
        single = LiveWebEnv(tasks=[task], sites={"lab": lab.url}, multiaction=False)
        try:
            single.reset(seed=0)
            assert "multiaction=False" in single.step("noop(); noop()")[4]["error"]
        finally:
            single.close()
        assert isinstance(obs["active_page_index"], np.ndarray)
    finally:
        env.close()


def test_drag_and_drop(lab: LabServer) -> None:
    task = {**LAB_TASKS[0], "task_id": "lab.form", "start_url": "__LAB__/form"}
    env = LiveWebEnv(tasks=[task], sites={"lab": lab.url}, obs_format="browsergym", noop_wait_ms=0)
    try:
        obs, _ = env.reset(seed=0)
        src = BrowserGymStyleAgent.find(obs, "button", "Drag me")
        dst = BrowserGymStyleAgent.find(obs, "region", "Drop zone")
        obs, _, _, _, info = env.step(f"drag_and_drop('{src}', '{dst}')")
        assert not info["error"] and "dropped it" in obs["axtree"]
    finally:
        env.close()


def test_upload_by_coordinates(lab: LabServer) -> None:
    task = {**LAB_TASKS[0], "task_id": "lab.form", "start_url": "__LAB__/form"}
    env = LiveWebEnv(tasks=[task], sites={"lab": lab.url}, obs_format="browsergym", noop_wait_ms=0)
    try:
        obs, _ = env.reset(seed=0)
        (Path(env.browser.upload_dir) / "photo.png").write_bytes(b"png")
        attach = BrowserGymStyleAgent.find(obs, "button", "Attachment")
        x, y, w, h = obs["extra_element_properties"][attach]["bbox"]
        obs, _, _, _, info = env.step(f"mouse_upload_file({x + w / 2}, {y + h / 2}, 'photo.png')")
        assert not info["error"] and "photo.png" in obs["axtree"]
    finally:
        env.close()


def test_a_plain_click_on_a_file_input_tells_the_agent_how_to_choose_files(lab: LabServer) -> None:
    task = {**LAB_TASKS[0], "task_id": "lab.form", "start_url": "__LAB__/form"}
    env = LiveWebEnv(tasks=[task], sites={"lab": lab.url}, obs_format="browsergym", noop_wait_ms=0)
    try:
        obs, _ = env.reset(seed=0)
        attach = BrowserGymStyleAgent.find(obs, "button", "Attachment")
        obs, _, _, _, info = env.step(f"click('{attach}')")
        assert not info["error"]
        assert any("file chooser opened" in e and "upload_file" in e for e in info["events"]), info["events"]
    finally:
        env.close()
